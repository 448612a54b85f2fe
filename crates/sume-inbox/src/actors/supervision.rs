//! Liveness of the daemon's tasks, for `/readyz`.
//!
//! Each long-lived task holds a [`TaskGuard`]. A task that ends without saying it finished
//! (a panic, an unexpected return) marks itself dead, and readiness fails: a dead task is a
//! failed health check, not a silent stall.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

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
