-- Statements on sume.instance_minutes (0009_instance_minutes.sql): the fleet's per-minute
-- counters (written by `instances_flush` of instances.sql, with the heartbeat).

-- name: instance_minutes_last_hour
-- The last 60 minutes up to the minute of $1 (or now()), summed over instances, every minute
-- present (zeros where nothing was counted). The range is one scan of the primary key.
with counted as (
    select minute,
           sum(stored)::int8 as stored, sum(duplicates)::int8 as duplicates,
           sum(unauthorized)::int8 as unauthorized, sum(unavailable)::int8 as unavailable,
           sum(closed_by_webhook)::int8 as closed_by_webhook,
           sum(closed_by_poll)::int8 as closed_by_poll, sum(given_up)::int8 as given_up
    from sume.instance_minutes
    where minute >= date_trunc('minute', coalesce($1::timestamptz, now())) - interval '59 minutes'
      and minute <= date_trunc('minute', coalesce($1::timestamptz, now()))
    group by minute
)
select g.minute,
       coalesce(c.stored, 0) as stored, coalesce(c.duplicates, 0) as duplicates,
       coalesce(c.unauthorized, 0) as unauthorized, coalesce(c.unavailable, 0) as unavailable,
       coalesce(c.closed_by_webhook, 0) as closed_by_webhook,
       coalesce(c.closed_by_poll, 0) as closed_by_poll, coalesce(c.given_up, 0) as given_up
from generate_series(
        date_trunc('minute', coalesce($1::timestamptz, now())) - interval '59 minutes',
        date_trunc('minute', coalesce($1::timestamptz, now())),
        interval '1 minute') as g(minute)
left join counted c on c.minute = g.minute
order by g.minute;

-- name: instance_minutes_prune
-- Removes at most $2 minute rows older than $1 hours (by $3, or now()), oldest first; the
-- caller repeats while a batch comes back full.
delete from sume.instance_minutes
where (minute, instance) in (
    select minute, instance from sume.instance_minutes
    where minute < coalesce($3::timestamptz, now()) - make_interval(hours => $1::int4)
    order by minute
    limit $2
);
