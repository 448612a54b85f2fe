//! `sume.rate_buckets` (statements of `sql/queries/rate_buckets.sql`): the fleet-wide token
//! bucket per API key that [`crate::sume_api::read_budget::Budget`] draws on, and each key's
//! reads today against the day's allowance and pace.

use serde::{Deserialize, Serialize};

use super::{sql, DbError, Store};

/// One take at a rate bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Take {
    /// Whether a token was taken.
    pub taken: bool,
    /// Tokens left (fractional: the bucket refills continuously).
    pub available: f64,
    /// Seconds the key is still paused for after a 429 (or until the next UTC day once the
    /// day's allowance is spent), 0 when not paused.
    pub paused_for: f64,
    /// Reads the key may still take this UTC day.
    pub left_today: i64,
    /// That UTC day, by the database's clock.
    pub today: chrono::NaiveDate,
}

impl Store {
    /// Creates the key's bucket, full, if it does not exist.
    pub async fn rate_buckets_ensure(&self, key_name: &str, capacity: f64) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::RATE_BUCKETS_ENSURE
            .execute(&client, &[&key_name, &capacity])
            .await?;
        Ok(())
    }

    /// Refills the key's bucket for the time passed and takes a token if there is one and the
    /// day's `daily` reads are not spent.
    pub async fn rate_buckets_take(
        &self,
        key_name: &str,
        per_sec: f64,
        capacity: f64,
        daily: i32,
    ) -> Result<Take, DbError> {
        let client = self.client().await?;
        let row = sql::RATE_BUCKETS_TAKE
            .query_opt(&client, &[&key_name, &per_sec, &capacity, &daily])
            .await?
            .ok_or_else(|| DbError::Invariant(format!("no rate bucket for key {key_name}")))?;
        Ok(Take {
            taken: row.get("taken"),
            available: row.get("available"),
            paused_for: row.get("paused_for"),
            left_today: row.get("left_today"),
            today: row.get("today"),
        })
    }

    /// Pauses the key for the whole fleet for `secs` (Sume said 429).
    pub async fn rate_buckets_pause(&self, key_name: &str, secs: f64) -> Result<(), DbError> {
        let client = self.client().await?;
        sql::RATE_BUCKETS_PAUSE
            .execute(&client, &[&key_name, &secs])
            .await?;
        Ok(())
    }
}

/// A key's reads this UTC day against its allowance and the day's pace (`GET /v1/stats`, the
/// console's overview, `sume-inbox stats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeyReadsToday {
    /// The key's name (SUME_API_KEYS).
    pub key_name: String,
    /// Reads the fleet took with it this UTC day (job reads, list pages and key checks).
    pub used: i64,
    /// The day's allowance (SUME_READ_DAILY) as last enforced; `None` until a read was taken
    /// since the allowance is recorded.
    pub limit: Option<i64>,
    /// What is left of it today.
    pub left: Option<i64>,
    /// The share of the UTC day gone by, 0 to 1.
    pub day_gone: f64,
    /// The reads the day's elapsed share allows: `limit * day_gone`. Using more than this is
    /// spending ahead of the day.
    pub pace: Option<i64>,
    /// The reads by midnight UTC if the day goes on as it went: `used / day_gone`.
    pub projected: i64,
}

impl KeyReadsToday {
    /// The pace and projection of `used` reads of `limit` when `day_gone` of the day is gone.
    pub fn new(key_name: String, used: i64, limit: Option<i64>, day_gone: f64) -> KeyReadsToday {
        let day_gone = day_gone.clamp(0.0, 1.0);
        // The first minutes of a day project from too little: no projection below a minute.
        let projected = if day_gone * 86_400.0 < 60.0 {
            used
        } else {
            (used as f64 / day_gone).round() as i64
        };
        KeyReadsToday {
            key_name,
            used,
            limit,
            left: limit.map(|l| (l - used).max(0)),
            day_gone,
            pace: limit.map(|l| (l as f64 * day_gone).round() as i64),
            projected,
        }
    }

    /// Whether the key spends faster than the day allows (ahead of its pace).
    pub fn ahead_of_pace(&self) -> bool {
        self.pace.is_some_and(|p| self.used > p)
    }
}

impl Store {
    /// The reads today of every key a live instance holds, by name.
    pub async fn rate_buckets_today(&self) -> Result<Vec<KeyReadsToday>, DbError> {
        let client = self.client().await?;
        let rows = sql::RATE_BUCKETS_TODAY.query(&client, &[]).await?;
        Ok(rows
            .iter()
            .map(|r| {
                let limit: Option<i32> = r.get("day_limit");
                KeyReadsToday::new(
                    r.get("key_name"),
                    r.get("used"),
                    limit.map(i64::from),
                    r.get("day_gone"),
                )
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pace_follows_the_share_of_the_day_gone() {
        let r = KeyReadsToday::new("k".into(), 3_000, Some(9_000), 0.25);
        assert_eq!(
            (r.left, r.pace, r.projected),
            (Some(6_000), Some(2_250), 12_000)
        );
        assert!(r.ahead_of_pace());
        let r = KeyReadsToday::new("k".into(), 2_000, Some(9_000), 0.5);
        assert_eq!((r.pace, r.projected), (Some(4_500), 4_000));
        assert!(!r.ahead_of_pace());
        // Spent: nothing left, never below zero.
        assert_eq!(
            KeyReadsToday::new("k".into(), 9_500, Some(9_000), 0.9).left,
            Some(0)
        );
        // Seconds into the day: no projection yet; no allowance recorded: no pace.
        let r = KeyReadsToday::new("k".into(), 5, None, 0.0001);
        assert_eq!((r.projected, r.pace, r.left), (5, None, None));
    }
}
