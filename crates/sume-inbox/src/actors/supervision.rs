//! How every long-lived task starts and is watched: each is an [`Actor`] (its name, and a `run`
//! that ends when told to stop), started with [`Tasks::spawn`], which registers it in the
//! [`Health`] table behind `/healthz`, `/readyz`, `sume_inbox_tasks_dead` and the fleet's
//! picture.
//!
//! A task that ends before it was told to stop (a panic, an unexpected return) is marked dead,
//! and health fails: a dead task is a failed health check, not a silent stall.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A long-lived task: what it needs is in the value, its loop is `run`.
pub trait Actor: Send + 'static {
    /// Its name in the health table (`attach`, `sweep-poll`, `ingest-0`).
    fn name(&self) -> String;

    /// Runs until `stop` is cancelled (the ingest writers: until their queue closes, which
    /// happens after it). Ending before that is a failure of the task.
    fn run(self, stop: CancellationToken) -> impl Future<Output = ()> + Send;
}

/// Where actors are started: one tracker to wait for them, one health table, and the token
/// that tells them to stop. Cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    tracker: TaskTracker,
    health: Health,
    stop: CancellationToken,
}

impl Tasks {
    /// Tasks that stop when `stop` is cancelled, registered in `health`.
    pub fn new(health: Health, stop: CancellationToken) -> Tasks {
        Tasks {
            tracker: TaskTracker::new(),
            health,
            stop,
        }
    }

    /// The same tracker and health table, with another stop token (tasks that stop at
    /// another moment of the shutdown, and are still waited for with the others).
    pub fn stopped_by(&self, stop: CancellationToken) -> Tasks {
        Tasks {
            stop,
            ..self.clone()
        }
    }

    /// Starts `actor` on a task of its own, registered under its name.
    pub fn spawn(&self, actor: impl Actor) {
        let guard = self.health.task(actor.name());
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            actor.run(stop.clone()).await;
            if stop.is_cancelled() {
                guard.finished();
            }
        });
    }

    /// The health table the tasks report to.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Tells the tasks to stop and waits for them, at most `timeout`; false when some did not
    /// stop in time.
    pub async fn stop(&self, timeout: Duration) -> bool {
        self.stop.cancel();
        self.tracker.close();
        tokio::time::timeout(timeout, self.tracker.wait())
            .await
            .is_ok()
    }
}

/// The state of every long-lived task of this instance; cheap to clone.
#[derive(Clone, Default)]
pub struct Health {
    tasks: Arc<Mutex<BTreeMap<String, TaskState>>>,
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Started and not ended.
    Running,
    /// Ended as it should, at shutdown.
    Finished,
    /// Ended unexpectedly: the instance is unhealthy.
    Dead,
}

impl TaskState {
    /// `running`, `finished` or `dead`: how the fleet's picture names it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Running => "running",
            TaskState::Finished => "finished",
            TaskState::Dead => "dead",
        }
    }
}

impl Health {
    /// Registers a running task; keep the guard inside the task.
    pub fn task(&self, name: impl Into<String>) -> TaskGuard {
        let name = name.into();
        self.tasks
            .lock()
            .expect("health lock")
            .insert(name.clone(), TaskState::Running);
        TaskGuard {
            health: self.clone(),
            name,
            finished: false,
        }
    }

    /// Names of tasks that died.
    pub fn dead(&self) -> Vec<String> {
        self.tasks
            .lock()
            .expect("health lock")
            .iter()
            .filter(|(_, s)| **s == TaskState::Dead)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Every task and its state, by name.
    pub fn snapshot(&self) -> BTreeMap<String, TaskState> {
        self.tasks.lock().expect("health lock").clone()
    }

    fn set(&self, name: &str, state: TaskState) {
        self.tasks
            .lock()
            .expect("health lock")
            .insert(name.to_owned(), state);
    }
}

/// Held by a running task; dropping it without [`TaskGuard::finished`] marks the task dead.
pub struct TaskGuard {
    health: Health,
    name: String,
    finished: bool,
}

impl TaskGuard {
    /// The task ended as it should (shutdown).
    pub fn finished(mut self) {
        self.finished = true;
        self.health.set(&self.name, TaskState::Finished);
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if !self.finished {
            tracing::error!(task = %self.name, "task stopped unexpectedly");
            self.health.set(&self.name, TaskState::Dead);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Quits(bool);

    impl Actor for Quits {
        fn name(&self) -> String {
            format!("quits-{}", self.0)
        }

        async fn run(self, stop: CancellationToken) {
            if !self.0 {
                stop.cancelled().await;
            }
        }
    }

    #[tokio::test]
    async fn a_task_that_ends_before_its_stop_is_dead() {
        let tasks = Tasks::new(Health::default(), CancellationToken::new());
        tasks.spawn(Quits(true));
        tasks.spawn(Quits(false));
        tokio::time::timeout(Duration::from_secs(5), async {
            while tasks.health().dead().is_empty() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
        assert_eq!(tasks.health().dead(), vec!["quits-true".to_owned()]);
        assert!(tasks.stop(Duration::from_secs(5)).await);
        let states = tasks.health().snapshot();
        assert_eq!(states["quits-false"], TaskState::Finished);
        assert_eq!(states["quits-true"], TaskState::Dead);
    }

    #[test]
    fn a_dropped_guard_is_a_dead_task() {
        let health = Health::default();
        let a = health.task("a");
        let b = health.task("b");
        a.finished();
        assert!(health.dead().is_empty());
        drop(b);
        assert_eq!(health.dead(), vec!["b".to_owned()]);
    }
}
