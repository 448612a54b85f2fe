-- The benchmark's own statements on sume.jobs (the daemon's are in sql/queries/jobs.sql).

-- name: jobs_register
-- What an application's submit path commits: the job row, here with its id as the order.
insert into sume.jobs (job_id, order_id) values ($1, $1) on conflict do nothing;

-- name: jobs_count_completed
select count(*) from sume.jobs where state = 'completed';

-- name: jobs_close_latency
-- Registration to close, in milliseconds: median, p99 and max.
select percentile_cont(0.5) within group (order by ms),
       percentile_cont(0.99) within group (order by ms), max(ms)
from (select extract(epoch from closed_at - created_at)::float8 * 1000 as ms
      from sume.jobs) l;

-- name: jobs_seed_closed
-- The sweep stage: $1 jobs closed two days ago.
insert into sume.jobs (job_id, order_id, api_key, state, sume_status, closed_by, created_at, closed_at)
select 'done_' || g, 'order_' || g, 'bench', 'completed', 'completed', 'webhook',
       now() - interval '2 days', now() - interval '2 days'
from generate_series(1, $1::int) g;

-- name: jobs_seed_open
-- The sweep stage: the open jobs due a poll.
insert into sume.jobs (job_id, order_id, api_key, created_at)
select id, id, 'bench', now() - interval '1 hour' from unnest($1::text[]) id;

-- name: jobs_reopen
-- The sweep stage's second round: the jobs the first one closed, open again.
update sume.jobs
set state = 'open', sume_status = null, closed_by = null, closed_at = null,
    closed_event_id = null, result = null, next_poll_at = null, poll_attempts = 0,
    last_polled_at = null, last_poll_answer = null
where job_id = any($1);

-- name: jobs_vacuum_analyze
vacuum analyze sume.jobs;

-- name: jobs_race_progress
-- The chaos suite's race: jobs closed, jobs in all, and events still waiting for a row that
-- exists (all three must settle before the race is judged).
select (select count(*) from sume.jobs where state <> 'open'),
       (select count(*) from sume.jobs),
       (select count(*) from sume.events e join sume.jobs j using (job_id)
        where e.applied_at is null);

-- name: jobs_race_rows
-- The chaos suite's race: each job as it closed, with how many of its events closed it and
-- how many events it has.
select j.job_id, j.state, j.sume_status, j.closed_by, j.closed_event_id,
       (select count(*) from sume.events e where e.job_id = j.job_id and e.outcome = 'closed'),
       (select count(*) from sume.events e where e.job_id = j.job_id)
from sume.jobs j;

-- name: jobs_register_many
-- The soak's application: the job rows of one tick, committed together, with the key name
-- the sweep reads them with.
insert into sume.jobs (job_id, order_id, api_key)
select j, j, $2 from unnest($1::text[]) j
on conflict do nothing;

-- name: jobs_of_key
-- The chaos suite's failover scenarios: every job of key $1, its state and Sume status, what
-- closed it and when (text, or null while open).
select job_id, state, sume_status, closed_by, closed_at::text
from sume.jobs
where api_key = $1;

-- name: jobs_first_closes_since
-- The chaos suite's failover: for jobs of key $2 registered at $1 (text, a timestamptz) or
-- later, the seconds from $1 to the first close by each closer (webhook, poll).
select closed_by, extract(epoch from min(closed_at) - $1::text::timestamptz)::float8
from sume.jobs
where api_key = $2 and created_at >= $1::text::timestamptz and closed_by is not null
group by closed_by;

-- name: jobs_closed_between
-- The chaos suite's Sume black hole: jobs closed from $1 to $2 (texts, timestamptz).
select count(*) from sume.jobs
where closed_at >= $1::text::timestamptz and closed_at < $2::text::timestamptz;

-- name: jobs_register_keyed
-- `sume-bench sweep`'s application: one job row, committed as soon as Sume answered its
-- create, with the key name the sweep reads it with.
insert into sume.jobs (job_id, order_id, api_key) values ($1, $1, $2) on conflict do nothing;

-- name: jobs_sweep_progress
-- `sume-bench sweep`: jobs still open, and jobs registered.
select count(*) filter (where state = 'open'), count(*) from sume.jobs;

-- name: jobs_sweep_rows
-- `sume-bench sweep`: each job as the daemon closed it, its close in seconds since the epoch.
select job_id, state, sume_status, closed_by,
       extract(epoch from closed_at)::float8 as closed_epoch
from sume.jobs;
