-- The demo's own statements on sume.jobs (the daemon's are in sql/queries/jobs.sql).

-- name: jobs_states
-- Each of the demo's jobs ($1: their ids) as the daemon left it, and what closed it.
select job_id, state, closed_by from sume.jobs where job_id = any($1);
