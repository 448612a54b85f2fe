//! `sume.instance_minutes` (statements of `sql/queries/instance_minutes.sql`): the fleet's
//! per-minute counters, written with each heartbeat (`instances.rs`), read as the last hour.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{sql, DbError, Store};
use crate::db::clock::Clock;

/// The counters of one minute (or of part of one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MinuteCounts {
    /// Webhooks stored new.
    pub stored: i64,
    /// Webhooks already stored (answered 204, nothing written).
    pub duplicates: i64,
    /// Webhooks refused 401.
    pub unauthorized: i64,
    /// Requests answered 503, whatever the cause.
    pub unavailable: i64,
    /// Jobs closed by a webhook.
    pub closed_by_webhook: i64,
    /// Jobs closed by a poll.
    pub closed_by_poll: i64,
    /// Jobs given up on.
    pub given_up: i64,
}

impl MinuteCounts {
    /// Whether nothing was counted.
    pub fn is_zero(&self) -> bool {
        *self == MinuteCounts::default()
    }

    /// Counts from [`MinuteCounts::values`]' order.
    pub fn from_values(v: [i64; 7]) -> MinuteCounts {
        let [stored, duplicates, unauthorized, unavailable, closed_by_webhook, closed_by_poll, given_up] =
            v;
        MinuteCounts {
            stored,
            duplicates,
            unauthorized,
            unavailable,
            closed_by_webhook,
            closed_by_poll,
            given_up,
        }
    }

    /// Each count of `self` with `sign` times the same count of `other` added.
    pub fn combine(&self, other: &MinuteCounts, sign: i64) -> MinuteCounts {
        let (a, b) = (self.values(), other.values());
        MinuteCounts::from_values(std::array::from_fn(|i| a[i] + sign * b[i]))
    }

    /// The counts in a fixed order: the series of the chart, and the columns of a flush.
    pub fn values(&self) -> [i64; 7] {
        [
            self.stored,
            self.duplicates,
            self.unauthorized,
            self.unavailable,
            self.closed_by_webhook,
            self.closed_by_poll,
            self.given_up,
        ]
    }
}

/// One minute of the fleet's last hour, summed over instances.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
pub struct FleetMinute {
    /// The minute, truncated.
    pub minute: DateTime<Utc>,
    /// What every instance counted in it.
    pub counts: MinuteCounts,
}

impl Store {
    /// The fleet's last 60 minutes, oldest first, every minute present.
    pub async fn instance_minutes_last_hour(
        &self,
        clock: &Clock,
    ) -> Result<Vec<FleetMinute>, DbError> {
        let client = self.client().await?;
        let rows = sql::INSTANCE_MINUTES_LAST_HOUR
            .query(&client, &[&clock.now()])
            .await?;
        Ok(rows
            .iter()
            .map(|r| FleetMinute {
                minute: r.get("minute"),
                counts: MinuteCounts {
                    stored: r.get("stored"),
                    duplicates: r.get("duplicates"),
                    unauthorized: r.get("unauthorized"),
                    unavailable: r.get("unavailable"),
                    closed_by_webhook: r.get("closed_by_webhook"),
                    closed_by_poll: r.get("closed_by_poll"),
                    given_up: r.get("given_up"),
                },
            })
            .collect())
    }

    /// Removes minute rows older than `keep_hours`, in at most ten statements of `batch`
    /// rows; answers the rows removed.
    pub async fn instance_minutes_prune(
        &self,
        keep_hours: i32,
        batch: i64,
        clock: &Clock,
    ) -> Result<u64, DbError> {
        let now = clock.now();
        let client = self.client().await?;
        let mut removed = 0;
        for _ in 0..10 {
            let n = sql::INSTANCE_MINUTES_PRUNE
                .execute(&client, &[&keep_hours, &batch, &now])
                .await?;
            removed += n;
            if n < batch as u64 {
                break;
            }
        }
        Ok(removed)
    }
}
