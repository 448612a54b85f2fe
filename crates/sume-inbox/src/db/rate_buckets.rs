//! `sume.rate_buckets` (statements of `sql/queries/rate_buckets.sql`): the fleet-wide token
//! bucket per API key that [`crate::sume_api::read_budget::Budget`] draws on.

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
