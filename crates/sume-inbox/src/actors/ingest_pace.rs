//! How long an ingest writer keeps collecting before it commits.
//!
//! A writer takes what has queued up and commits it. Alone, it commits as soon as it has one
//! delivery: that is the least latency. Beside another writer whose commit is in flight, a
//! writer that commits what it has at once (a few deliveries, those that arrived since) pays a
//! commit, the largest cost of a batch, for a handful; with a few dozen clients that halves the
//! deliveries per commit and doubles the database's work per event. So a writer that finds
//! another committing keeps collecting until its batch is as large as the batches in flight,
//! or until one of those commits ends (then it commits what it has, as the only writer would):
//! a delivery never waits longer than the commit already in flight, and under a steady load
//! the writers overlap with batches of one size. At a light load (a delivery or two per commit)
//! a batch waiting for the one in flight would save little and cost its latency, so only a
//! commit of [`PACE_FROM`] deliveries or more makes another writer wait. At 16 connections
//! the deliveries per commit went from 4.5 to 5.8 (docs/benchmarks.md, "A quarter of the
//! receiver's CPU").

use tokio::sync::{mpsc, watch};

/// The fewest deliveries in flight that make a collecting writer wait for more.
pub(super) const PACE_FROM: usize = 4;

/// The deliveries in the batches being committed, shared by the writers of one channel.
#[derive(Clone)]
pub(super) struct Pace {
    in_flight: watch::Sender<usize>,
}

impl Pace {
    pub(super) fn new() -> Pace {
        Pace {
            in_flight: watch::Sender::new(0),
        }
    }

    /// Marks `deliveries` as being committed until the guard is dropped.
    pub(super) fn committing(&self, deliveries: usize) -> Committing {
        self.in_flight.send_modify(|n| *n += deliveries);
        Committing {
            pace: self.clone(),
            deliveries,
        }
    }

    /// Receives into `batch` (up to `max`): at least one delivery, then, while other writers
    /// commit [`PACE_FROM`] or more, more until the batch holds as many as they do or one of
    /// their commits ends.
    /// Answers false when the channel is closed and empty.
    pub(super) async fn collect<T>(
        &self,
        rx: &mut mpsc::Receiver<T>,
        batch: &mut Vec<T>,
        max: usize,
    ) -> bool {
        if rx.recv_many(batch, max).await == 0 {
            return false;
        }
        let mut committing = self.in_flight.subscribe();
        let mut seen = *committing.borrow_and_update();
        while seen >= PACE_FROM && batch.len() < seen.min(max) {
            tokio::select! {
                received = rx.recv_many(batch, max - batch.len()) => {
                    if received == 0 {
                        break;
                    }
                }
                changed = committing.changed() => {
                    let now = *committing.borrow_and_update();
                    // A commit ended (less in flight), or the channel's writers are gone.
                    if changed.is_err() || now < seen {
                        break;
                    }
                    seen = now;
                }
            }
        }
        true
    }
}

/// Deliveries being committed; no longer counted once dropped (also when the write is
/// cancelled or panics).
pub(super) struct Committing {
    pace: Pace,
    deliveries: usize,
}

impl Drop for Committing {
    fn drop(&mut self) {
        let n = self.deliveries;
        self.pace.in_flight.send_modify(|v| *v -= n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn alone_a_writer_takes_what_is_there() {
        let pace = Pace::new();
        let (tx, mut rx) = mpsc::channel(16);
        tx.send(1).await.unwrap();
        let mut batch = Vec::new();
        assert!(pace.collect(&mut rx, &mut batch, 8).await);
        assert_eq!(batch, vec![1]);
    }

    #[tokio::test]
    async fn beside_a_commit_a_writer_waits_for_as_many_as_it_holds() {
        let pace = Pace::new();
        let (tx, mut rx) = mpsc::channel(16);
        let in_flight = pace.committing(4);
        tx.send(1).await.unwrap();
        let feeder = tokio::spawn(async move {
            for i in 2..=6 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                tx.send(i).await.unwrap();
            }
            tx
        });
        let mut batch = Vec::new();
        assert!(pace.collect(&mut rx, &mut batch, 8).await);
        assert_eq!(batch, vec![1, 2, 3, 4]);
        drop(in_flight);
        drop(feeder.await.unwrap());
    }

    #[tokio::test]
    async fn a_light_commit_in_flight_makes_no_one_wait() {
        let pace = Pace::new();
        let (tx, mut rx) = mpsc::channel(16);
        let _in_flight = pace.committing(PACE_FROM - 1);
        tx.send(1).await.unwrap();
        let mut batch = Vec::new();
        let collected =
            tokio::time::timeout(Duration::from_secs(5), pace.collect(&mut rx, &mut batch, 8));
        assert!(collected.await.expect("no wait"));
        assert_eq!(batch, vec![1]);
    }

    #[tokio::test]
    async fn the_end_of_the_commit_in_flight_ends_the_wait() {
        let pace = Pace::new();
        let (tx, mut rx) = mpsc::channel(16);
        let in_flight = pace.committing(100);
        tx.send(1).await.unwrap();
        let ender = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(in_flight);
        });
        let mut batch = Vec::new();
        assert!(pace.collect(&mut rx, &mut batch, 512).await);
        assert_eq!(batch, vec![1]);
        ender.await.unwrap();
        assert_eq!(*pace.in_flight.borrow(), 0);
        drop(tx);
        assert!(!pace.collect(&mut rx, &mut Vec::new(), 8).await);
    }

    #[tokio::test]
    async fn no_more_than_the_batch_limit_is_awaited() {
        let pace = Pace::new();
        let (tx, mut rx) = mpsc::channel(16);
        let _in_flight = pace.committing(50);
        for i in 0..4 {
            tx.send(i).await.unwrap();
        }
        let mut batch = Vec::new();
        assert!(pace.collect(&mut rx, &mut batch, 4).await);
        assert_eq!(batch.len(), 4);
    }
}
