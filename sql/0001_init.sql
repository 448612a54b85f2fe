-- The inbox, the jobs it is applied to, and what could not be filed or applied.
-- Everything lives in the schema `sume`; the application's own tables stay where they are.

create table sume.jobs (
    -- Written by the application's submit path, inside its own transaction
    -- (insert ... on conflict do nothing), or by POST /v1/jobs.
    job_id          text primary key check (length(job_id) between 1 and 255),
    order_id        text,
    -- The name of the configured API key (SUME_API_KEYS) that created the job; never the key.
    api_key         text,
    -- Owned by sume-inbox from here on.
    state           text not null default 'open'
                    check (state in ('open', 'completed', 'failed', 'canceled', 'expired')),
    sume_status     text,
    closed_by       text check (closed_by in ('webhook', 'poll', 'give_up')),
    closed_event_id text,
    result          jsonb,
    created_at      timestamptz not null default now(),
    updated_at      timestamptz not null default now(),
    closed_at       timestamptz,
    check ((state = 'open') = (closed_at is null)),
    check ((state = 'open') = (closed_by is null))
);

-- Tells every listening instance that a job row has committed (NOTIFY is delivered on commit).
create function sume.jobs_notify() returns trigger language plpgsql as $$
begin
    perform pg_notify('sume_jobs', new.job_id);
    return null;
end
$$;

create trigger jobs_notify after insert on sume.jobs
    for each row execute function sume.jobs_notify();

create table sume.events (
    -- X-Sume-Event-Id, else the body's id, else sha256 of the body: the dedupe key.
    event_id     text primary key,
    job_id       text not null,
    event_type   text,
    status       text,
    result       jsonb,
    -- The delivery exactly as received and verified, so it can be re-verified and replayed.
    body         bytea not null,
    signed_at    bigint not null,
    signature    text not null,
    received_at  timestamptz not null default now(),
    -- Set once, by the transaction that applied the event to its job; never reset.
    applied_at   timestamptz,
    outcome      text check (outcome in ('closed', 'status', 'ignored', 'disagreement')),
    check ((applied_at is null) = (outcome is null))
);

-- Attach: the events of a job (pending ones filtered by applied_at; a job has few events).
create index events_job_id on sume.events (job_id);
-- Catch-up and sweep: pending events by age. Small: applied events leave it.
create index events_pending on sume.events (received_at) where applied_at is null;

-- Deliveries whose signature was valid but whose body names no job: kept, never answered 4xx.
create table sume.dead_letters (
    dead_letter_id text primary key,
    reason         text not null,
    body           bytea not null,
    header_event_id text,
    signed_at      bigint not null,
    signature      text not null,
    received_at    timestamptz not null default now()
);

-- A terminal observation that contradicts the state a job was already closed with.
create table sume.disagreements (
    id          bigint generated always as identity primary key,
    job_id      text not null,
    kept_state  text not null,
    seen_state  text not null,
    seen_status text not null,
    source      text not null check (source in ('webhook', 'poll')),
    event_id    text,
    recorded_at timestamptz not null default now()
);
create index disagreements_job_id on sume.disagreements (job_id);
