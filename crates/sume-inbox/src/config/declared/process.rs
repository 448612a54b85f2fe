//! The process (threads, shutdown, logs) and the operator's commands' way to a daemon.

use super::declare;
use crate::config::setting::{Form, Setting, POSITIVE};

declare! { PROCESS, "Process",
    /// The runtime's worker threads; read before the command line (the runtime runs it).
    WORKER_THREADS {
        default: Some("1"),
        form: Form::Count { min: 1, max: 64 },
        about: "threads running the daemon's tasks (1 to 64; environment only). One cost the daemon less CPU per event than two (21 against 26 us at 16 connections, 88 against 99 at 1,000 webhooks/s) and the same at 256 connections, where it carried 34,000 webhooks/s on about 60% of one core (docs/benchmarks.md, \"One worker thread\"); raise it where one core is the limit, or run more instances",
    }
    /// How long shutdown waits.
    SHUTDOWN_TIMEOUT {
        flag: Some("shutdown-timeout"),
        default: Some("20s"),
        form: POSITIVE,
        about: "how long shutdown waits for in-flight work (twice at most: once for requests, once for tasks)",
    }
    /// The log format.
    LOG_FORMAT {
        flag: Some("log-format"),
        default: Some("pretty"),
        form: Form::Choice(&["json", "pretty"]),
        about: "`json` (one object a line, for log shippers, the refusal that stops a start included, a refused flag or argument too; `--help` and `--version` stay text) or `pretty`; every command takes it",
    }
    /// The log filter.
    RUST_LOG {
        default: Some("info"),
        form: Form::Text,
        about: "which log lines are written (environment only): `info`, `warn`, or per module such as `info,sume_inbox::actors::sweep=debug` (tracing-subscriber's `EnvFilter`); one that does not parse, or names a level misspelled (`inof`, `warning`: a module's name to the filter, which would silence the rest), stops the start",
    }
}

declare! { ADMIN_COMMANDS, "Admin commands (stats, jobs show, replay, ...)",
    /// A daemon's admin API, instead of the database.
    SUME_INBOX_ADMIN_URL {
        flag: Some("admin-url"),
        form: Form::HttpUrl { example: "http://127.0.0.1:9090" },
        about: "a daemon's admin API (e.g. `http://127.0.0.1:9090`) for the admin commands, used instead of `DATABASE_URL`",
    }
    /// The operator's token of that API.
    SUME_INBOX_ADMIN_TOKEN {
        flag: Some("admin-token"),
        form: Form::Secret,
        secret: true,
        about: "the operator's token of that API (its `ADMIN_TOKEN`)",
    }
}
