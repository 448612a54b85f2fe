//! Where each metric is registered, with its name and help text: the list an operator reads
//! `/metrics` by.

use prometheus_client::registry::Registry;

use super::Metrics;

impl Metrics {
    /// What this instance counts.
    pub(super) fn register_counters(&self, r: &mut Registry) {
        let help = "Verified deliveries by the position of the secret that verified them in SUME_WEBHOOK_SECRET";
        r.register(
            "webhooks",
            "Webhook deliveries by how they were answered",
            self.webhooks.clone(),
        );
        r.register(
            "webhooks_verified_by_secret",
            help,
            self.webhooks_by_secret.clone(),
        );
        r.register(
            "webhook_event_id_mismatch",
            "Verified deliveries whose X-Sume-Event-Id differs from the body's own event id (stored under the body's)",
            self.event_id_mismatch.clone(),
        );
        r.register(
            "webhook_clock_skew_seconds",
            "This instance's clock minus the signed timestamp of the last verified delivery",
            self.webhook_clock_skew.clone(),
        );
        r.register(
            "ingest_batch_size",
            "Deliveries written per ingest transaction",
            self.ingest_batch_size.clone(),
        );
        r.register(
            "ingest_commit_seconds",
            "Time to write and commit one ingest batch",
            self.ingest_commit_seconds.clone(),
        );
        r.register(
            "attach_latency_seconds",
            "From an event stored to its job closed by it",
            self.attach_latency_seconds.clone(),
        );
        r.register(
            "jobs_closed",
            "Jobs closed, by webhook, poll or give_up",
            self.jobs_closed.clone(),
        );
        r.register(
            "foreign_events_set_aside",
            "Events set aside because every key the fleet holds answered 404",
            self.events_set_aside.clone(),
        );
        r.register(
            "orphans_found",
            "Jobs Sume knows with events waiting but no row",
            self.orphans_found.clone(),
        );
        r.register(
            "orphan_events_expired",
            "Events whose job never got a row, moved to the dead letters after ORPHAN_RETENTION",
            self.orphan_events_expired.clone(),
        );
        r.register(
            "disagreements_seen",
            "Terminal observations contradicting a job's final state",
            self.disagreements_seen.clone(),
        );
        r.register(
            "unknown_statuses",
            "Statuses from Sume this version does not know, read as in flight, by where they were read",
            self.unknown_statuses.clone(),
        );
        r.register(
            "attach_hints_skipped",
            "Hints for events whose job had no row and was not registered since: no query",
            self.attach_hints_skipped.clone(),
        );
        r.register(
            "retention_removed_rows",
            "Rows removed by retention",
            self.retention_removed.clone(),
        );
        self.register_sume(r);
        self.register_port(r);
    }

    /// Calls to Sume's API: their answers, 429s, refusals and the budget's waits.
    fn register_sume(&self, r: &mut Registry) {
        r.register(
            "sume_reads",
            "Reads of Sume's jobs by way: one job, or a page of a key's list",
            self.sume_reads.clone(),
        );
        r.register(
            "list_page_settled",
            "Open jobs each page of a key's list settled",
            self.list_page_settled.clone(),
        );
        r.register(
            "give_up_rechecks",
            "Give-ups made without an answer from Sume, asked about again, by outcome",
            self.give_up_rechecks.clone(),
        );
        r.register(
            "sume_requests",
            "Calls to Sume's API by key and status code",
            self.sume_requests.clone(),
        );
        r.register(
            "sume_rate_limited",
            "429 answers from Sume",
            self.sume_rate_limited.clone(),
        );
        r.register(
            "sume_refused",
            "402 (out of credits) and 403 (key without the scope) answers from Sume, by key and code",
            self.sume_refused.clone(),
        );
        r.register(
            "rate_budget_wait_seconds",
            "Time spent waiting for the fleet-wide request budget",
            self.rate_budget_wait_seconds.clone(),
        );
    }

    /// The ports' connections, timeouts and refusals.
    pub(super) fn register_port(&self, r: &mut Registry) {
        r.register(
            "port_connections_open",
            "Connections open on LISTEN_ADDR",
            self.port_connections_open.clone(),
        );
        r.register(
            "port_connections_shed",
            "Connections lingering after an answer given with their body unread, or still sending their request headers, closed at MAX_CONNECTIONS to make room",
            self.port_connections_shed.clone(),
        );
        r.register(
            "port_connections_refused",
            "New connections closed at once at MAX_CONNECTIONS (none could be shed)",
            self.port_connections_refused.clone(),
        );
        r.register(
            "port_timeouts",
            "Connections closed or requests refused by HEADER_TIMEOUT, BODY_TIMEOUT or IDLE_TIMEOUT",
            self.port_timeouts.clone(),
        );
        r.register(
            "port_in_flight_refused",
            "Requests answered 503 at once because MAX_IN_FLIGHT were being handled",
            self.port_in_flight_refused.clone(),
        );
        r.register(
            "port_protocols_refused",
            "Connections opened with a protocol LISTEN_ADDR does not speak (HTTP/2 with prior knowledge), answered 505 and closed",
            self.port_protocols_refused.clone(),
        );
        r.register(
            "port_lingering_connections",
            "Connections on LISTEN_ADDR answered with their request body unread, reading what the client still sends before they close",
            self.port_lingering.clone(),
        );
        r.register(
            "port_lingers",
            "Connections on LISTEN_ADDR that read what their client sent after an answer given with the body unread, by what ended it: client (closed its side), time, bytes, shed",
            self.port_lingers.clone(),
        );
        r.register(
            "port_body_memory_refused",
            "Webhooks answered 503 because their next bytes did not fit in MAX_BODY_MEMORY and no other body still being read could make room",
            self.port_body_memory_refused.clone(),
        );
        r.register(
            "port_bodies_shed",
            "Webhooks still reading their body, answered 503 to make room for a newer request (its connection at MAX_CONNECTIONS, its slot at MAX_IN_FLIGHT, or its bytes under MAX_BODY_MEMORY)",
            self.port_bodies_shed.clone(),
        );
        self.admin_port.register_admin(r);
        r.register(
            "admin_waiters_refused",
            "Waits refused with 503 because MAX_WAITERS requests were waiting",
            self.waiters_refused.clone(),
        );
    }

    /// What is read at scrape time: the fleet's numbers from the database, this instance's
    /// pool and tasks.
    pub(super) fn register_gauges(&self, r: &mut Registry) {
        let oldest =
            "Age of the oldest waiting event, orphans' excluded (they have an alert of their own)";
        r.register(
            "db_up",
            "1 when the last scrape could read the database",
            self.db_up.clone(),
        );
        r.register(
            "inbox_waiting_events",
            "Events waiting for their job row (not applied, not set aside)",
            self.inbox_waiting.clone(),
        );
        r.register(
            "inbox_oldest_age_seconds",
            oldest,
            self.inbox_oldest_age_seconds.clone(),
        );
        r.register(
            "dead_letters",
            "Verified deliveries kept as dead letters (naming no job, or under an event id stored for another job or status), not replayed",
            self.dead_letters.clone(),
        );
        r.register(
            "orphan_jobs",
            "Job ids with an orphan verdict",
            self.orphan_jobs.clone(),
        );
        r.register(
            "disagreements",
            "Disagreements recorded",
            self.disagreements.clone(),
        );
        r.register("open_jobs", "Jobs still open", self.open_jobs.clone());
        r.register(
            "open_jobs_unknown_key",
            "Open jobs whose api_key is not among this instance's SUME_API_KEYS: this instance never polls them (read each minute)",
            self.open_jobs_unknown_key.clone(),
        );
        r.register(
            "db_notification_queue_usage",
            "pg_notification_queue_usage(): share of PostgreSQL's NOTIFY queue in use; when full, closes and registrations fail",
            self.notification_queue_usage.clone(),
        );
        self.register_instance_gauges(r);
    }

    /// This instance's own gauges: its pool, its tasks, its waits, its keys.
    fn register_instance_gauges(&self, r: &mut Registry) {
        let dead =
            "This instance's tasks that stopped unexpectedly (it fails /healthz and /readyz)";
        r.register(
            "db_pool_in_use",
            "Pool connections in use",
            self.pool_in_use.clone(),
        );
        r.register(
            "db_pool_idle",
            "Pool connections idle",
            self.pool_idle.clone(),
        );
        r.register(
            "db_pool_waiting",
            "Tasks waiting for a pool connection",
            self.pool_waiting.clone(),
        );
        r.register("tasks_dead", dead, self.tasks_dead.clone());
        r.register(
            "start_time_seconds",
            "Unix time this instance started, its counters at 0 (the alerts read an instance younger than their window by its totals)",
            self.start_time_seconds.clone(),
        );
        r.register(
            "admin_waiters",
            "Requests waiting for a job to close on this instance (GET /v1/jobs/{id}?wait=)",
            self.waiters.clone(),
        );
        r.register(
            "sume_api_key_usable",
            "1 when the key's last check (a one-item job list) answered 200",
            self.sume_api_key_usable.clone(),
        );
        r.register(
            "sume_api_reads_left_today",
            "Reads the key may still take this UTC day (SUME_READ_DAILY), as of its last read",
            self.reads_left_today.clone(),
        );
        r.register(
            "sume_api_verdicts_held",
            "1 while Sume's 404s are not taken as verdicts (a key failed its check, or the breaker is open)",
            self.sume_api_verdicts_held.clone(),
        );
    }
}
