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
    (select coalesce(max(version), 0) from sume.schema_migrations) as schema_version;
