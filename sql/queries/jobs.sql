-- Statements on sume.jobs. Each starts with a `-- name:` line; the daemon prepares them by name.

-- name: jobs_insert
-- Registration through the API; the application's own path is the same insert in its transaction.
insert into sume.jobs (job_id, order_id, api_key)
values ($1, $2, $3)
on conflict (job_id) do nothing;

-- name: jobs_get
select job_id, order_id, api_key, state, sume_status, closed_by, closed_event_id, result,
       created_at, updated_at, closed_at
from sume.jobs
where job_id = $1;

-- name: jobs_lock
-- Serialises every writer of these jobs (attach on any instance, the poll) for one transaction.
-- Sorted, so two batches that share jobs never lock them in opposite orders.
select job_id, state, sume_status
from sume.jobs
where job_id = any($1)
order by job_id
for update;

-- name: jobs_apply
-- The outcome of one attach or poll, computed under jobs_lock. Guarded all the same: a closed
-- job never changes state, and closed_at is set once.
update sume.jobs j
set state           = u.state,
    sume_status     = u.sume_status,
    closed_by       = coalesce(j.closed_by, u.closed_by),
    closed_event_id = coalesce(j.closed_event_id, u.closed_event_id),
    result          = coalesce(u.result, j.result),
    closed_at       = case when u.state <> 'open' then coalesce(j.closed_at, now()) end,
    updated_at      = now()
from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
     as u(job_id, state, sume_status, closed_by, closed_event_id, result)
where j.job_id = u.job_id
  and (j.state = 'open' or j.state = u.state);
