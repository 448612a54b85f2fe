-- The status sweep: polling open jobs, checking stale inbox rows, and the fleet's shared
-- request budget for Sume's API.

alter table sume.jobs
    add column next_poll_at     timestamptz,
    add column poll_attempts    integer not null default 0,
    add column last_polled_at   timestamptz,
    add column last_poll_answer text,
    add column lease_owner      text,
    add column lease_until      timestamptz,
    add column close_reason     text;

-- Open jobs by when they are due: never polled yet (due POLL_AFTER after created_at), or
-- polled and rescheduled. Closed jobs are in neither, so a pass costs what is due, not what
-- the table holds.
create index jobs_poll_first on sume.jobs (created_at) where state = 'open' and next_poll_at is null;
create index jobs_poll_next on sume.jobs (next_poll_at) where state = 'open' and next_poll_at is not null;

-- Events of jobs that every key reports unknown are set aside: kept, marked, out of the way.
alter table sume.events
    add column set_aside_at     timestamptz,
    add column set_aside_reason text;
drop index sume.events_pending;
create index events_pending on sume.events (received_at)
    where applied_at is null and set_aside_at is null;

-- One row per job id whose events waited past INBOX_GRACE with no job row: the check against
-- Sume's status endpoint, its verdict and the answers each key gave.
create table sume.inbox_checks (
    job_id        text primary key,
    verdict       text not null default 'pending' check (verdict in ('pending', 'foreign', 'orphan')),
    answers       jsonb not null default '{}',
    attempts      integer not null default 0,
    created_at    timestamptz not null default now(),
    checked_at    timestamptz,
    next_check_at timestamptz not null default now(),
    lease_owner   text,
    lease_until   timestamptz
);
create index inbox_checks_due on sume.inbox_checks (next_check_at) where verdict = 'pending';
create index inbox_checks_orphans on sume.inbox_checks (created_at) where verdict = 'orphan';

-- A token bucket per API key, shared by every instance: the fleet as a whole stays within
-- SUME_READ_RATE, and a Retry-After seen by one instance pauses them all.
create table sume.rate_buckets (
    key_name     text primary key,
    tokens       double precision not null,
    refilled_at  timestamptz not null default now(),
    paused_until timestamptz not null default 'epoch'
);
