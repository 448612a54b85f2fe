-- Statements on sume.events, the inbox.

-- name: events_insert
-- One ingest batch, sorted by event_id (so concurrent batches never deadlock on shared ids).
-- Answers the ids that were new; the others were duplicates.
insert into sume.events (event_id, job_id, event_type, status, result, body, signed_at, signature)
select *
from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::bytea[],
            $7::int8[], $8::text[])
on conflict (event_id) do nothing
returning event_id;

-- name: events_attachable
-- Which of these jobs have a committed row and events waiting. Takes no locks: a cheap filter
-- before attach locks anything.
select distinct e.job_id
from sume.events e
where e.job_id = any($1)
  and e.applied_at is null
  and exists (select 1 from sume.jobs j where j.job_id = e.job_id);

-- name: events_attachable_scan
-- The catch-up scan: any waiting event whose job row exists (a lost notification, a crash).
select distinct e.job_id
from sume.events e
where e.applied_at is null
  and e.set_aside_at is null
  and exists (select 1 from sume.jobs j where j.job_id = e.job_id)
limit $1;

-- name: events_pending_for_jobs
-- Run after jobs_lock, so it sees every event committed before the lock was taken.
select event_id, job_id, status, result,
       extract(epoch from clock_timestamp() - received_at)::float8 as waited
from sume.events
where job_id = any($1)
  and applied_at is null
order by job_id, received_at, event_id;

-- name: events_mark_applied
update sume.events e
set applied_at = now(),
    outcome    = u.outcome
from unnest($1::text[], $2::text[]) as u(event_id, outcome)
where e.event_id = u.event_id
  and e.applied_at is null;

-- name: events_for_job
select event_id, event_type, status, received_at, applied_at, outcome
from sume.events
where job_id = $1
order by received_at, event_id;

-- name: events_set_aside
-- Sets aside the waiting events of a job every key reported unknown, unless its row exists.
update sume.events e
set set_aside_at     = now(),
    set_aside_reason = $2
where e.job_id = $1
  and e.applied_at is null
  and e.set_aside_at is null
  and not exists (select 1 from sume.jobs j where j.job_id = e.job_id);
