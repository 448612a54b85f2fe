//! The two ports: the public one (webhooks and health checks, facing the internet) with its
//! limits against slow and numerous clients, and the admin one (the admin API, the console,
//! `/metrics`) with its tokens and the requests waiting for a close.

use std::time::Duration;

use super::declare;
use crate::config::setting::{at_least, Form, Setting, POSITIVE};

declare! { PUBLIC_PORT, "Public port (webhooks)",
    /// The public port.
    LISTEN_ADDR {
        flag: Some("listen-addr"),
        default: Some("0.0.0.0:8080"),
        form: Form::Address,
        about: "webhooks, `/healthz`, `/readyz`",
    }
    /// How far a signed timestamp may be from now.
    WEBHOOK_TOLERANCE {
        flag: Some("webhook-tolerance"),
        default: Some("5m"),
        form: at_least(Duration::from_secs(1)),
        about: "how far a webhook's timestamp may be from now (at least 1s: timestamps are whole seconds); see \"Retries and timestamps\" below before changing it",
    }
    /// The largest body taken.
    MAX_BODY_BYTES {
        flag: Some("max-body-bytes"),
        default: Some("1MiB"),
        form: Form::Size { min: 1, max: (4 << 30) - 1 },
        about: "largest webhook body (413 beyond)",
    }
    /// Time to send the headers.
    HEADER_TIMEOUT {
        flag: Some("header-timeout"),
        default: Some("5s"),
        form: POSITIVE,
        about: "time a client has to send a request's headers: from the accept, or from the first byte of a later request on a kept-alive connection (a later request sent in the same packets as the one before it, pipelined, is timed from that one's answer, as an idle connection: by `IDLE_TIMEOUT`); past it the connection is closed; on `ADMIN_ADDR` too",
    }
    /// Time to send the body.
    BODY_TIMEOUT {
        flag: Some("body-timeout"),
        default: Some("30s"),
        form: POSITIVE,
        about: "time a client has to send a request's whole body once its headers are in (408 past it; 1 MiB at 35 KB/s fits), and to take a response it is sent; on `ADMIN_ADDR` too (never cutting a `?wait=`, which sends no body)",
    }
    /// Time between requests on a kept-alive connection.
    IDLE_TIMEOUT {
        flag: Some("idle-timeout"),
        default: Some("60s"),
        form: POSITIVE,
        about: "how long a kept-alive connection may sit between the end of a response and the first byte of the next request; at least `HEADER_TIMEOUT`; on `ADMIN_ADDR` too",
    }
    /// Open connections.
    MAX_CONNECTIONS {
        flag: Some("max-connections"),
        default: Some("10000"),
        form: Form::Count { min: 1, max: 1_000_000 },
        about: "open connections on `LISTEN_ADDR`, more than `MAX_IN_FLIGHT` (each request in flight holds one); beyond, the oldest one lingering after an answer given with its body unread is closed to make room, else the oldest one still sending (or not yet sending) its headers, else the webhook that has been reading its body the longest is shed (503 with `Retry-After`), else the new one is closed; cut at start to what the open-file limit leaves beside the pool and the admin port's floor (a warning says so)",
    }
    /// Requests handled at once.
    MAX_IN_FLIGHT {
        flag: Some("max-in-flight"),
        default: Some("1024"),
        form: Form::Count { min: 1, max: 1_000_000 },
        about: "requests handled at once on `LISTEN_ADDR` (`/healthz` and `/readyz` answer from memory outside it); at the limit the oldest webhook still reading its body is shed for the newcomer, else 503 with `Retry-After` at once; below `MAX_CONNECTIONS`, and kept below the connection cap when the open-file limit cuts that",
    }
    /// Bytes of bodies held at once.
    MAX_BODY_MEMORY {
        flag: Some("max-body-memory"),
        default: Some("64MiB"),
        form: Form::Size { min: 1, max: (4 << 30) - 1 },
        about: "bytes of webhook bodies held at once on `LISTEN_ADDR`, claimed as they arrive (never what `Content-Length` declares) and held until the answer (at least `MAX_BODY_BYTES`, under 4GiB); when a body's next bytes do not fit, the oldest other bodies still being read are shed to make room, else 503 with `Retry-After`",
    }
}

declare! { ADMIN_PORT, "Admin port (admin API, console, metrics)",
    /// The admin port.
    ADMIN_ADDR {
        flag: Some("admin-addr"),
        default: Some("127.0.0.1:9090"),
        form: Form::Address,
        about: "admin API, console and metrics; a non-loopback address requires `ADMIN_TOKEN`",
    }
    /// The operator's token.
    ADMIN_TOKEN {
        flag: Some("admin-token"),
        form: Form::Token,
        secret: true,
        about: "bearer token for every admin request, the operator's (16+ characters)",
    }
    /// The application's token.
    ADMIN_APP_TOKEN {
        flag: Some("admin-app-token"),
        form: Form::Token,
        secret: true,
        about: "bearer token of the application's admin routes only (register, read, wait, the feed); needs `ADMIN_TOKEN`, differs from it",
    }
    /// Host names the admin API answers.
    ADMIN_HOSTS {
        flag: Some("admin-hosts"),
        default: Some(""),
        form: Form::Names,
        about: "comma-separated `Host` names the admin API answers besides its own address (e.g. the name a proxy or a Service gives it); one no `Host` header could hold (`http://x`, a space inside), or an empty entry (a stray comma), stops the start",
    }
    /// Open connections on the admin port.
    MAX_ADMIN_CONNECTIONS {
        flag: Some("max-admin-connections"),
        default_note: Some("`MAX_WAITERS` + 100"),
        form: Form::Count { min: 1, max: 1_000_000 },
        about: "open connections on `ADMIN_ADDR`, more than `MAX_WAITERS` (each `?wait=` holds one); beyond, the oldest one lingering after an answer given with its body unread is closed to make room, else the oldest one sending no request (headers pending, or idle), or the new one if every connection is busy with a request; cut at start to what the open-file limit leaves beside the public port's cap and the pool",
    }
    /// Requests waiting for a close.
    MAX_WAITERS {
        flag: Some("max-waiters"),
        default: Some("1000"),
        form: Form::Count { min: 0, max: 100_000 },
        about: "admin requests waiting at once for a job to close (`?wait=`); beyond, 503 with `Retry-After`; `0` refuses every wait",
    }
    /// The longest wait.
    MAX_WAIT {
        flag: Some("max-wait"),
        default: Some("60s"),
        form: POSITIVE,
        about: "the longest a request waits (`?wait=`); a longer `wait` waits this long, answered `X-Wait-Outcome: timeout` when the job is still open",
    }
    /// What wakes waiters.
    WAIT_WAKEUP {
        flag: Some("wait-wakeup"),
        default: Some("listen"),
        form: Form::Choice(&["listen", "poll"]),
        about: "what wakes waiters: `listen` (one LISTEN `sume_job_closed` connection per instance, outside the pool; polls while it is down) or `poll` (where LISTEN is unavailable)",
    }
    /// How often waiters are polled.
    WAIT_POLL_INTERVAL {
        flag: Some("wait-poll-interval"),
        default: Some("1s"),
        form: at_least(Duration::from_millis(100)),
        about: "how often waiters are polled, when they are; at most `MAX_WAIT`; at least 100ms: each poll queries the database, and a shorter one (`1ms`) would keep every instance querying it without pause while anyone waits",
    }
}
