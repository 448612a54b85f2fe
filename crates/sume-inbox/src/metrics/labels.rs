//! The label sets of the metrics: what a series is broken down by. Names of keys and the
//! position of a secret, never a key or a secret.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

/// How a webhook delivery was answered (the `outcome` label of `sume_inbox_webhooks`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum WebhookOutcome {
    /// Stored new: 204.
    stored,
    /// Already stored: 204.
    duplicate,
    /// Verified but naming no job, kept as a dead letter: 204.
    dead_lettered,
    /// Its event id is stored already for another job, or for its job with another status:
    /// kept as a dead letter, not applied: 204.
    id_reused,
    /// Missing or wrong signature, or a stale timestamp: 401.
    unauthorized,
    /// Body over MAX_BODY_BYTES: 413.
    too_large,
    /// Body whose chunked framing broke, or that came in more pieces than the port reads for
    /// one body ([`crate::http::webhook_body::max_frames`]): 400.
    malformed,
    /// Not committed in time: 503.
    unavailable,
    /// A POST to a path other than `/webhooks/sume` whose signing headers pass the checks
    /// made before a body is read (well formed, the timestamp fresh): 404.
    misrouted,
    /// Its sender closed (or reset) the connection before the body was whole: nothing stored,
    /// 400 to a sender still reading.
    aborted,
}

impl WebhookOutcome {
    /// Every outcome (each counted from 0 at start).
    pub const ALL: [WebhookOutcome; 10] = [
        WebhookOutcome::stored,
        WebhookOutcome::duplicate,
        WebhookOutcome::dead_lettered,
        WebhookOutcome::id_reused,
        WebhookOutcome::unauthorized,
        WebhookOutcome::too_large,
        WebhookOutcome::malformed,
        WebhookOutcome::unavailable,
        WebhookOutcome::misrouted,
        WebhookOutcome::aborted,
    ];
}

/// Which timer closed a connection on the public port (the `kind` label of
/// `sume_inbox_port_timeouts`); [`crate::http::server`] says what each measures.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum TimeoutKind {
    /// HEADER_TIMEOUT: a request's headers did not arrive in time.
    header,
    /// BODY_TIMEOUT: a webhook's body did not arrive in time (answered 408).
    body,
    /// IDLE_TIMEOUT: a kept-alive connection sent no next request in time.
    idle,
    /// BODY_TIMEOUT applied to a response the client did not take.
    write,
}

impl TimeoutKind {
    /// Every timer (each counted from 0 at start).
    pub const ALL: [TimeoutKind; 4] = [
        TimeoutKind::header,
        TimeoutKind::body,
        TimeoutKind::idle,
        TimeoutKind::write,
    ];
}

/// The label of `sume_inbox_port_timeouts`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TimeoutLabels {
    /// Which timer fired.
    pub kind: TimeoutKind,
}

/// A protocol a port does not speak (the `protocol` label of
/// `sume_inbox_port_protocols_refused`): the ports speak HTTP/1.1 alone.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RefusedProtocol {
    /// HTTP/2 with prior knowledge: a connection opened with HTTP/2's preface
    /// (`PRI * HTTP/2.0`), answered 505 and closed.
    http2_prior_knowledge,
}

impl RefusedProtocol {
    /// Every protocol refused (each counted from 0 at start).
    pub const ALL: [RefusedProtocol; 1] = [RefusedProtocol::http2_prior_knowledge];
}

/// The label of `sume_inbox_port_protocols_refused`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabels {
    /// Which protocol the connection opened with.
    pub protocol: RefusedProtocol,
}

/// What ended a connection's linger, the reading of what its client still sent after an
/// answer given with its body unread (the `by` label of `sume_inbox_port_lingers`; see
/// [`crate::http::linger`]).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum LingerEnd {
    /// The client closed (or reset) its side: it had read the answer, or gave up.
    client,
    /// The time bound passed with the client still connected.
    time,
    /// The byte bound was read: the client was sending far more than the port takes.
    bytes,
    /// Shed at the connection cap for a newcomer.
    shed,
}

impl LingerEnd {
    /// Every end (each counted from 0 at start).
    pub const ALL: [LingerEnd; 4] = [
        LingerEnd::client,
        LingerEnd::time,
        LingerEnd::bytes,
        LingerEnd::shed,
    ];
}

/// The label of `sume_inbox_port_lingers`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LingerLabels {
    /// What ended it.
    pub by: LingerEnd,
}

/// The label of `sume_inbox_webhooks`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// How the delivery was answered.
    pub outcome: WebhookOutcome,
}

/// Where a status this version does not know was read (the `source` label of
/// `sume_inbox_unknown_statuses`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum StatusSource {
    /// A verified webhook's body.
    webhook,
    /// A status read of one job (a poll, a recheck, an inbox check).
    status_read,
    /// A page of a key's list.
    list,
}

impl StatusSource {
    /// Every place a status is read (each counted from 0 at start).
    pub const ALL: [StatusSource; 3] = [
        StatusSource::webhook,
        StatusSource::status_read,
        StatusSource::list,
    ];
}

/// The label of `sume_inbox_unknown_statuses`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusSourceLabels {
    /// Where it was read.
    pub source: StatusSource,
}

/// The position of the verifying secret in SUME_WEBHOOK_SECRET (never the secret).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SecretLabels {
    /// 0 for the first secret, 1 for the second, ...
    pub secret: String,
}

/// The label of `sume_inbox_jobs_closed`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClosedLabels {
    /// `webhook`, `poll` or `give_up`.
    pub by: String,
}

impl ClosedLabels {
    /// Every value of `by` (each counted from 0 at start).
    pub const BY: [&'static str; 3] = ["webhook", "poll", "give_up"];
}

/// The label of `sume_inbox_sume_api_key_usable`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KeyLabels {
    /// The API key's name (never the key).
    pub key: String,
}

/// The labels of `sume_inbox_sume_requests`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApiLabels {
    /// The API key's name (never the key).
    pub key: String,
    /// The HTTP status, or `timeout` / `error`.
    pub code: String,
}

impl ApiLabels {
    /// The answers that are refusals (`sume_inbox_sume_refused`), alerted on by code.
    pub const REFUSED: [&'static str; 2] = ["402", "403"];
    /// The codes of `sume_inbox_sume_requests` the alerts name (counted from 0 at start for
    /// every key): the refusals and 429.
    pub const ALERTED: [&'static str; 3] = ["402", "403", "429"];
}

/// What asking again about a blind give-up did (the `outcome` label of
/// `sume_inbox_give_up_rechecks`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum RecheckOutcome {
    /// Sume's terminal status superseded the give-up.
    superseded,
    /// Sume answered about the job (`running`, or 404 under every working key): it stands.
    stands,
    /// Still no answer about the job: asked again later.
    again,
}

impl RecheckOutcome {
    /// Every outcome (each counted from 0 at start).
    pub const ALL: [RecheckOutcome; 3] = [
        RecheckOutcome::superseded,
        RecheckOutcome::stands,
        RecheckOutcome::again,
    ];
}

/// The label of `sume_inbox_give_up_rechecks`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecheckLabels {
    /// What the recheck did.
    pub outcome: RecheckOutcome,
}

/// Which way a read of Sume went (the `way` label of `sume_inbox_sume_reads`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ReadWay {
    /// One job (`GET /jobs/{id}`).
    job,
    /// A page of a key's list (`GET /jobs`), up to a hundred jobs.
    list,
}

impl ReadWay {
    /// Both ways (each counted from 0 at start).
    pub const ALL: [ReadWay; 2] = [ReadWay::job, ReadWay::list];
}

/// The label of `sume_inbox_sume_reads`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadLabels {
    /// Which way the read went.
    pub way: ReadWay,
}
