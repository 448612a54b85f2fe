-- Each job's recent polls, for the operator's timeline: one row per status call (the key asked,
-- Sume's answer, how long it took), in a ring of slots per job. A call's row goes to slot
-- `seq % 20`, seq counting the job's calls, with `insert ... on conflict (job_id, slot) do
-- update`: a job polled for a week still holds 20 rows, its latest, so the table is bounded by
-- construction (20 rows per open or kept job) and needs no sweeping of its own.
--
-- The rows go with their job: the foreign key deletes them with it (JOB_RETENTION, or the
-- application's own delete), also when an older binary deletes the job. Additive: an older
-- binary never reads or writes the table.
create table sume.job_polls (
    job_id     text not null references sume.jobs (job_id) on delete cascade,
    slot       smallint not null check (slot between 0 and 19),
    -- The job's status calls counted from 1; the newest row of a job has the highest.
    seq        bigint not null check (seq > 0),
    polled_at  timestamptz not null,
    -- The name of the configured key asked (SUME_API_KEYS), never the key.
    key_name   text not null,
    -- As the poll read it: "200 running", "404", "429", "timeout", "error: ..."; Sume's
    -- status is Sume's text, cut to 200 characters.
    answer     text not null check (length(answer) <= 200),
    latency_ms integer not null check (latency_ms >= 0),
    primary key (job_id, slot)
);
