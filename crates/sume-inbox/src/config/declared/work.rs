//! The ingest writers and the attach task.

use std::time::Duration;

use super::declare;
use crate::config::setting::{at_least, Form, Setting, POSITIVE};

declare! { INGEST_ATTACH, "Ingest and attach",
    /// Writer tasks.
    INGEST_WRITERS {
        flag: Some("ingest-writers"),
        default: Some("2"),
        form: Form::Count { min: 1, max: 64 },
        about: "ingest writer tasks: while one commits, the next collects its batch",
    }
    /// The most events one transaction takes.
    INGEST_BATCH_MAX {
        flag: Some("ingest-batch-max"),
        default: Some("512"),
        form: Form::Count { min: 1, max: 100_000 },
        about: "most deliveries per ingest transaction",
    }
    /// How long a webhook waits for its commit.
    INGEST_TIMEOUT {
        flag: Some("ingest-timeout"),
        default: Some("10s"),
        form: POSITIVE,
        about: "a webhook waiting longer for its commit is answered 503",
    }
    /// The catch-up scan's period.
    ATTACH_SCAN_INTERVAL {
        flag: Some("attach-scan-interval"),
        default: Some("5s"),
        default_note: Some("`1s` with `DB_POOLER=transaction` and no `LISTEN_DATABASE_URL`"),
        form: at_least(Duration::from_millis(100)),
        about: "how often attach scans for waiting events whose job row exists (lost notifications); at least 100ms: each scan queries the database, and a shorter one (`1ms`) would keep every instance querying it without pause",
    }
}
