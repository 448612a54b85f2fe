//! The sweep (stale inbox rows, open jobs) and retention.

use std::time::Duration;

use super::declare;
use crate::config::setting::{at_least, Form, Setting, POSITIVE};

declare! { SWEEP, "Sweep",
    /// Time between passes.
    SWEEP_INTERVAL {
        flag: Some("sweep-interval"),
        default: Some("30s"),
        form: at_least(Duration::from_millis(100)),
        about: "time between sweep passes (jittered); at least 100ms: each pass claims from the database, and a shorter one (`1ms`) would keep every instance querying it without pause",
    }
    /// How long an event waits with no job row before Sume is asked.
    INBOX_GRACE {
        flag: Some("inbox-grace"),
        default: Some("5m"),
        form: POSITIVE,
        about: "how long an event may wait with no job row before Sume is asked whose job it is; longer than your longest submit transaction",
    }
    /// The first poll of an open job.
    POLL_AFTER {
        flag: Some("poll-after"),
        default: Some("2m"),
        form: POSITIVE,
        about: "first poll of an open job, after registration; later polls back off, doubling up to `POLL_MAX_INTERVAL`. The job is read by itself then, with `LIST_WALKS=off` or where its key's jobs are read one by one. Where walks settle its key's jobs (`LIST_WALKS=auto`), the key's list is walked when its oldest open job's poll falls due, no sooner than the key's pace of reads allows (see \"The sweep at Sume's scale\")",
    }
    /// The longest interval between two polls.
    POLL_MAX_INTERVAL {
        flag: Some("poll-max-interval"),
        default: Some("30m"),
        form: POSITIVE,
        about: "longest interval between two polls of a job; at least `POLL_AFTER`",
    }
    /// When an open job is given up.
    POLL_GIVE_UP {
        flag: Some("poll-give-up"),
        default: Some("24h"),
        form: POSITIVE,
        about: "an open job with no terminal status is closed as `expired`; longer than `POLL_AFTER`",
    }
    /// How long a give-up made without an answer from Sume is asked about again.
    GIVE_UP_RECHECK {
        flag: Some("give-up-recheck"),
        default: Some("7d"),
        form: Form::DurationOr { words: &["off"], min: Duration::from_millis(1) },
        about: "a give-up decided while Sume gave no answer about the job (a timeout, 429, 5xx, no read budget left) is asked about again for this long, at a low cadence (from `POLL_MAX_INTERVAL`, doubling up to 6h) and only with reads the open jobs' polls leave; Sume's terminal status then supersedes it (`closed_by = poll`), a `running` answer or a 404 under a working key lets it stand; `off` never asks again",
    }
    /// How long a passed key check lets 404s count as verdicts.
    KEY_CHECK_MAX_AGE {
        flag: Some("key-check-max-age"),
        default: Some("15m"),
        form: at_least(Duration::from_secs(600)),
        about: "how long a key's passed check (`GET /jobs?limit=1` answered 200, redone every 5 minutes) lets Sume's 404s count as verdicts; when no check of a key has passed for this long (the checks failed, or found no read budget), nothing is set aside and nothing given up until one passes again",
    }
    /// Whether a key's list may be walked instead of reading its jobs one by one.
    LIST_WALKS {
        flag: Some("list-walks"),
        default: Some("auto"),
        form: Form::Choice(&["auto", "off"]),
        about: "`auto`: where walking a key's list at Sume (`GET /jobs`, a hundred jobs a read) is expected to cost fewer reads than reading the key's due jobs one by one, walks settle its jobs: a walk falls due when the oldest open job's poll does, no sooner than the reads left today allow, a fifth of `SUME_READ_DAILY` kept back (see \"The sweep at Sume's scale\"); `off`: every job is read by itself when its poll falls due",
    }
    /// What one claim takes.
    SWEEP_BATCH {
        flag: Some("sweep-batch"),
        default: Some("100"),
        form: Form::Count { min: 1, max: 10_000 },
        about: "jobs (and inbox checks) one claim takes",
    }
    /// How long a claim holds.
    SWEEP_LEASE {
        flag: Some("sweep-lease"),
        default: Some("2m"),
        form: POSITIVE,
        about: "how long a claim holds (a crashed instance's claims return after it); more than twice `SUME_TIMEOUT`",
    }
    /// Status calls in flight.
    SWEEP_CONCURRENCY {
        flag: Some("sweep-concurrency"),
        default: Some("4"),
        form: Form::Count { min: 1, max: 1_000 },
        about: "status calls in flight per instance",
    }
}

declare! { RETENTION_GROUP, "Retention",
    /// How long applied and set-aside events are kept.
    RETENTION {
        flag: Some("retention"),
        default: Some("14d"),
        form: at_least(Duration::from_secs(3600)),
        about: "how long applied and set-aside events, and entries of the feed of closes, are kept (a feed consumer must resume within it); at least 1h, and longer than Sume's whole retry horizon so a late redelivery is still a duplicate",
    }
    /// How long dead letters are kept.
    DEAD_LETTER_RETENTION {
        flag: Some("dead-letter-retention"),
        default: Some("90d"),
        form: Form::DurationOr { words: &["never"], min: Duration::from_millis(1) },
        about: "how long dead letters are kept: at least `RETENTION`, or `never` (only when set so explicitly); each is a verified delivery answered 2xx that nobody replayed yet, and `SumeInboxDeadLetters` fires while any waits",
    }
    /// How long an event waits for a job row that never comes.
    ORPHAN_RETENTION {
        flag: Some("orphan-retention"),
        default: Some("7d"),
        form: at_least(Duration::from_secs(3600)),
        about: "how long an event whose job has no row keeps waiting (an orphan's, or any event nobody can ask about without `SUME_API_KEYS`); then it moves to the dead letters, where `replay --dead-letters` applies it once its job is registered; at least 1h, and longer than `INBOX_GRACE`",
    }
    /// Rows one retention statement removes.
    RETENTION_BATCH {
        flag: Some("retention-batch"),
        default: Some("1000"),
        form: Form::Count { min: 1, max: 1_000_000 },
        about: "rows one retention statement removes",
    }
    /// How long closed jobs are kept.
    JOB_RETENTION {
        flag: Some("job-retention"),
        default: Some("off"),
        form: Form::DurationOr { words: &["off", "never"], min: Duration::from_millis(1) },
        about: "how long closed jobs are kept: `off` (the rows are the application's) or a duration of at least `RETENTION` and `POLL_GIVE_UP` (see [Retention](#retention))",
    }
}
