//! Every job the simulator ever made, and the idempotency keys that made them.
//!
//! Jobs are kept for the simulator's life (a test of a few thousand jobs must see all of
//! them). Creation and the idempotency lookup happen under one lock, so two concurrent creates
//! with the same key and `Idempotency-Key` make exactly one job.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rand::distributions::Alphanumeric;
use rand::Rng;
use tokio::time::Instant;

use crate::job::{Job, Kind};
use crate::keys::Caller;

/// `prefix` followed by `len` random letters and digits.
pub fn random_id(prefix: &str, len: usize) -> String {
    let tail: String = rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(len)
        .map(char::from)
        .collect();
    format!("{prefix}{tail}")
}

/// What a create call got.
#[derive(Debug, Clone)]
pub enum Created {
    New(Arc<Job>),
    /// The key had already used this `Idempotency-Key`: the job it made then.
    Replayed(Arc<Job>),
}

/// Filters and paging of `GET /jobs`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub limit: usize,
    /// The id of the last job of the previous page.
    pub cursor: Option<String>,
    pub status: Option<String>,
    pub kind: Option<Kind>,
    pub order: crate::choices::ListOrder,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Arc<Job>>,
    order: Vec<Arc<Job>>,
    idempotency: HashMap<(String, String), Arc<Job>>,
}

/// All jobs, by id and in creation order.
#[derive(Debug, Default)]
pub struct JobStore {
    inner: RwLock<Inner>,
}

impl JobStore {
    /// Makes a job with `make(new_id)`, unless `key` already used `idempotency_key`.
    pub fn create(
        &self,
        key: &str,
        idempotency_key: Option<&str>,
        make: impl FnOnce(String) -> Job,
    ) -> Created {
        let mut inner = self.inner.write().expect("store lock");
        let idem = idempotency_key.map(|k| (key.to_owned(), k.to_owned()));
        if let Some(job) = idem.as_ref().and_then(|k| inner.idempotency.get(k)) {
            return Created::Replayed(job.clone());
        }
        let id = loop {
            let id = random_id("job_", 24);
            if !inner.by_id.contains_key(&id) {
                break id;
            }
        };
        let job = Arc::new(make(id.clone()));
        inner.by_id.insert(id, job.clone());
        inner.order.push(job.clone());
        if let Some(k) = idem {
            inner.idempotency.insert(k, job.clone());
        }
        Created::New(job)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.inner
            .read()
            .expect("store lock")
            .by_id
            .get(id)
            .cloned()
    }

    /// Every job, oldest first.
    pub fn all(&self) -> Vec<Arc<Job>> {
        self.inner.read().expect("store lock").order.clone()
    }

    pub fn len(&self) -> usize {
        self.inner.read().expect("store lock").order.len()
    }

    /// One page of the jobs `caller` may see, in `q.order` (newest first by default), and
    /// whether more follow.
    pub fn list(&self, caller: &Caller, now: Instant, q: &ListQuery) -> (Vec<Arc<Job>>, bool) {
        use crate::choices::ListOrder;
        let inner = self.inner.read().expect("store lock");
        let mut ordered: Vec<&Arc<Job>> = inner
            .order
            .iter()
            .filter(|j| caller.can_see(&j.owner))
            .filter(|j| q.kind.is_none_or(|k| j.kind == k))
            .filter(|j| q.status.as_deref().is_none_or(|s| j.status(now) == s))
            .collect();
        match q.order {
            ListOrder::Newest => ordered.reverse(),
            ListOrder::Oldest => {}
            ListOrder::Updated => ordered.sort_by_key(|j| std::cmp::Reverse(j.updated(now))),
        }
        let mut visible = ordered.into_iter();
        if let Some(cursor) = &q.cursor {
            // Skip through the cursor; an unknown cursor yields an empty page.
            for j in visible.by_ref() {
                if &j.id == cursor {
                    break;
                }
            }
        }
        let mut page: Vec<Arc<Job>> = visible.by_ref().take(q.limit + 1).cloned().collect();
        let has_more = page.len() > q.limit;
        page.truncate(q.limit);
        (page, has_more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::AppliedFaults;
    use crate::job::{Outcome, WebhookProgress, WebhookState};
    use std::sync::Mutex;
    use std::time::Duration;

    fn caller(member: &str) -> Arc<Caller> {
        Arc::new(Caller {
            name: member.to_owned(),
            member: member.to_owned(),
            workspace: "w".to_owned(),
        })
    }

    fn job(id: String, owner: Arc<Caller>) -> Job {
        Job {
            id,
            kind: Kind::VideoGeneration,
            owner,
            webhook_url: None,
            idempotency_key: None,
            created_wall: chrono::Utc::now(),
            created: Instant::now(),
            queued_for: Duration::ZERO,
            duration: Duration::from_secs(60),
            outcome: Outcome::Completed,
            faults: AppliedFaults::default(),
            overrides: None,
            envelope: true,
            progress: Mutex::new(WebhookProgress {
                state: WebhookState::Waiting,
                attempts: 0,
                delivered_at: None,
                settled: false,
            }),
        }
    }

    #[test]
    fn idempotency_is_per_key() {
        let store = JobStore::default();
        let a = caller("a");
        let first = match store.create("a", Some("idem-1"), |id| job(id, a.clone())) {
            Created::New(j) => j,
            Created::Replayed(_) => panic!("first create replayed"),
        };
        match store.create("a", Some("idem-1"), |_| unreachable!("must not make a job")) {
            Created::Replayed(j) => assert_eq!(j.id, first.id),
            Created::New(_) => panic!("second create made a job"),
        }
        assert!(matches!(
            store.create("b", Some("idem-1"), |id| job(id, a.clone())),
            Created::New(_)
        ));
        assert_eq!(store.len(), 2);
        assert!(first.id.starts_with("job_") && first.id.len() == 28);
    }

    #[test]
    fn lists_only_what_the_caller_sees_in_pages() {
        let store = JobStore::default();
        let (a, b) = (caller("a"), caller("b"));
        for _ in 0..5 {
            store.create("a", None, |id| job(id, a.clone()));
            store.create("b", None, |id| job(id, b.clone()));
        }
        let now = Instant::now();
        let q = ListQuery {
            limit: 3,
            ..ListQuery::default()
        };
        let (page, more) = store.list(&a, now, &q);
        assert_eq!(page.len(), 3);
        assert!(more);
        assert!(page.iter().all(|j| j.owner.member == "a"));
        let q2 = ListQuery {
            cursor: Some(page[2].id.clone()),
            ..q
        };
        let (rest, more) = store.list(&a, now, &q2);
        assert_eq!(rest.len(), 2);
        assert!(!more);
    }

    #[test]
    fn the_list_order_is_a_setting() {
        use crate::choices::ListOrder;
        let store = JobStore::default();
        let a = caller("a");
        let ids: Vec<String> = (0..4)
            .map(|_| match store.create("a", None, |id| job(id, a.clone())) {
                Created::New(j) | Created::Replayed(j) => j.id.clone(),
            })
            .collect();
        let now = Instant::now();
        let listed = |order| {
            let q = ListQuery {
                limit: 10,
                order,
                ..ListQuery::default()
            };
            let (page, _) = store.list(&a, now, &q);
            page.iter().map(|j| j.id.clone()).collect::<Vec<_>>()
        };
        let mut newest = ids.clone();
        newest.reverse();
        assert_eq!(listed(ListOrder::Newest), newest);
        assert_eq!(listed(ListOrder::Oldest), ids);
        assert_eq!(listed(ListOrder::Updated).len(), 4);
    }
}
