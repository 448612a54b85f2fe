-- A give-up (closed_by = 'give_up') decided while Sume gave no answer about the job (a timeout,
-- a 429, a 5xx, no read budget left) is the daemon's guess made blind: such a job is asked
-- about again, at a low cadence, until `until_at`, with the reads the open jobs' polls leave.
-- Sume's terminal status then supersedes the give-up through the same fold as a poll; a
-- `running` answer, or a 404 under a key known to work, lets it stand and ends the asking.
-- A table of its own (not columns of sume.jobs): the rows are few, the index small, and the
-- jobs table is neither rewritten nor locked long by this migration. The previous release
-- gives jobs up without a row here, as before.
create table sume.give_up_rechecks (
    job_id      text primary key references sume.jobs (job_id) on delete cascade,
    until_at    timestamptz not null,
    next_at     timestamptz not null,
    attempts    int not null default 0,
    last_answer text,
    lease_owner text,
    lease_until timestamptz
);
create index give_up_rechecks_due on sume.give_up_rechecks (next_at);
