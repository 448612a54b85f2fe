-- Reads across tables: the numbers an operator and the metrics watch.

-- name: stats_gauges
-- The fleet-wide numbers an operator alerts on, each served by a partial index.
select
    (select count(*) from sume.events
      where applied_at is null and set_aside_at is null) as waiting,
    coalesce((select extract(epoch from now() - min(e.received_at))::float8 from sume.events e
               where e.applied_at is null and e.set_aside_at is null
                 and not exists (select 1 from sume.inbox_checks c
                                 where c.job_id = e.job_id and c.verdict = 'orphan')), 0)
      as oldest_age,
    (select count(*) from sume.dead_letters where replayed_at is null) as dead_letters,
    (select count(*) from sume.inbox_checks where verdict = 'orphan') as orphans,
    (select count(*) from sume.disagreements) as disagreements,
    (select count(*) from sume.jobs where state = 'open' and next_poll_at is null)
      + (select count(*) from sume.jobs where state = 'open' and next_poll_at is not null)
      as open_jobs,
    -- The share of the notification queue in use (0 to 1): a listener that stops reading
    -- fills it, and when it is full every transaction that notifies (a close, a registration)
    -- fails at commit.
    pg_notification_queue_usage() as notification_queue;

-- name: stats_summary
-- The numbers an operator checks first; each served by an index, whatever the table sizes.
-- `live`: the instances heard from in the last five minutes and not stopped (a stopped one's
-- last heartbeat shows every task finished).
with live as (
    select api_keys from sume.instances
    where last_seen > now() - interval '5 minutes'
      and exists (select 1 from jsonb_each_text(tasks) t where t.value <> 'finished')
)
select
    (select count(*) from sume.jobs where state = 'open' and next_poll_at is null)
      + (select count(*) from sume.jobs where state = 'open' and next_poll_at is not null)
      as open_jobs,
    (select count(*) from sume.events where applied_at is null and set_aside_at is null) as waiting,
    coalesce((select extract(epoch from now() - min(received_at))::float8 from sume.events
               where applied_at is null and set_aside_at is null), 0) as oldest_waiting_secs,
    (select count(*) from sume.events where applied_at is null and set_aside_at is not null) as set_aside,
    (select count(*) from sume.inbox_checks where verdict = 'orphan') as orphans,
    (select count(*) from sume.inbox_checks where verdict = 'pending') as checks_pending,
    (select count(*) from sume.dead_letters where replayed_at is null) as dead_letters,
    (select count(*) from sume.disagreements) as disagreements,
    (select coalesce(max(version), 0) from sume.schema_migrations) as schema_version,
    (select count(*) from live) as instances_live,
    (select count(*) from live where api_keys = '{}') as instances_without_keys,
    (select count(*) from live where cardinality(api_keys) > 0) as instances_with_keys,
    -- Open jobs naming a key that no live instance has (counted once some live instance says
    -- which keys it has): the sweep never polls them.
    (select count(*)
       from (select api_key from sume.jobs where state = 'open' and next_poll_at is null
             union all
             select api_key from sume.jobs where state = 'open' and next_poll_at is not null) j
      where j.api_key is not null
        and exists (select 1 from live where api_keys is not null)
        and not exists (select 1 from live where j.api_key = any(live.api_keys)))
      as open_jobs_unknown_key;

-- name: stats_unknown_keys
-- Open jobs naming an API key that is not among $1 (this instance's key names), by key: at
-- most ten keys, the most jobs first. They are never polled by this instance.
select api_key, count(*) as jobs
from (select api_key from sume.jobs where state = 'open' and next_poll_at is null
      union all
      select api_key from sume.jobs where state = 'open' and next_poll_at is not null) j
where api_key is not null and not (api_key = any($1::text[]))
group by api_key
order by count(*) desc, api_key
limit 10;
