-- Statements on sume.instances and sume.instance_minutes (0009_instance_minutes.sql): each
-- instance's heartbeat and per-minute counters, and the fleet's picture read from them.

-- name: instances_flush
-- One flush of instance $1 (host $2, pid $3, version $4, started $5, tasks $6, at $7 or the
-- database's now()): the heartbeat, and the counts of flushes numbered $8 (parallel arrays:
-- $9 minutes, $10 stored, $11 duplicates, $12 unauthorized, $13 unavailable, $14 closed by
-- webhook, $15 by poll, $16 given up; $17 the names of its API keys). Counts are added to what a minute holds, so a minute
-- written in several flushes adds up; a flush numbered at or below the instance's
-- `flushed_seq` was applied already (its answer was lost) and adds nothing. Every CTE reads
-- the statement's one snapshot, so `prev` is the number before this flush.
with prev as (
    select flushed_seq from sume.instances where instance = $1
), fresh as (
    select m.minute,
           sum(m.stored)::int8 as stored, sum(m.duplicates)::int8 as duplicates,
           sum(m.unauthorized)::int8 as unauthorized, sum(m.unavailable)::int8 as unavailable,
           sum(m.by_webhook)::int8 as by_webhook, sum(m.by_poll)::int8 as by_poll,
           sum(m.given_up)::int8 as given_up
    from unnest($8::int8[], $9::timestamptz[], $10::int8[], $11::int8[], $12::int8[],
                $13::int8[], $14::int8[], $15::int8[], $16::int8[])
           as m(seq, minute, stored, duplicates, unauthorized, unavailable, by_webhook,
                by_poll, given_up)
    where m.seq > coalesce((select flushed_seq from prev), 0)
    group by m.minute
), beat as (
    insert into sume.instances as i
        (instance, hostname, pid, version, started_at, last_seen, tasks, flushed_seq, api_keys)
    values ($1, $2, $3::int4, $4, $5, coalesce($7::timestamptz, now()), $6::jsonb,
            coalesce((select max(s) from unnest($8::int8[]) s), 0), $17::text[])
    on conflict (instance) do update
    set last_seen = excluded.last_seen,
        tasks = excluded.tasks,
        api_keys = excluded.api_keys,
        flushed_seq = greatest(i.flushed_seq, excluded.flushed_seq)
    returning 1
), counted as (
    insert into sume.instance_minutes as c
        (minute, instance, stored, duplicates, unauthorized, unavailable,
         closed_by_webhook, closed_by_poll, given_up)
    select minute, $1, stored, duplicates, unauthorized, unavailable, by_webhook, by_poll,
           given_up
    from fresh
    order by minute
    on conflict (minute, instance) do update
    set stored = c.stored + excluded.stored,
        duplicates = c.duplicates + excluded.duplicates,
        unauthorized = c.unauthorized + excluded.unauthorized,
        unavailable = c.unavailable + excluded.unavailable,
        closed_by_webhook = c.closed_by_webhook + excluded.closed_by_webhook,
        closed_by_poll = c.closed_by_poll + excluded.closed_by_poll,
        given_up = c.given_up + excluded.given_up
    returning 1
)
select (select count(*) from beat) as beats, (select count(*) from counted) as minutes;

-- name: instances_list
-- Every instance seen (at most $2), the most recently seen first, with how long ago by the
-- database's clock ($1, or now()).
select instance, hostname, pid, version, started_at, last_seen, tasks,
       extract(epoch from coalesce($1::timestamptz, now()) - last_seen)::float8 as silent_secs
from sume.instances
order by last_seen desc, instance
limit $2;

-- name: instances_keyed_live
-- Whether a live instance of the fleet asks Sume about the inbox: heard from in the last five
-- minutes, a task not finished, and keys in its heartbeat (or a heartbeat that does not say its
-- keys: it may have some). An instance without keys marks the events nobody will ask about
-- (events_orphan_late) only when none does.
select exists (
    select 1 from sume.instances i
    where i.last_seen > now() - interval '5 minutes'
      and (i.api_keys is null or cardinality(i.api_keys) > 0)
      and exists (select 1 from jsonb_each_text(i.tasks) t where t.value <> 'finished')
) as keyed;

-- name: instances_prune
-- Removes instances unseen for $1 hours (by $2, or now()), at most 1000 at a time.
delete from sume.instances
where instance in (
    select instance from sume.instances
    where last_seen < coalesce($2::timestamptz, now()) - make_interval(hours => $1::int4)
    limit 1000
);

-- name: instances_key_names
-- The names of the API keys held by the instances heard from in the last five minutes, each
-- once, sorted; with $1 false, only those not stopped (a stopped one's last heartbeat shows
-- every task finished).
-- - Not stopped (live, as stats_summary counts them): the keys a registration may name,
--   whichever instance takes it, since the sweep leaves each job to an instance holding its key.
-- - Stopped too ($1 true): the keys whose 404 an inbox check's "foreign" verdict waits for (a
--   key reads only its own member's jobs, so one key's 404 says nothing of another member's
--   job). A restart (the old instance stopped, the new one not yet heard from) does not end its
--   keys, and a key whose holders are all gone for good counts no more after five minutes.
-- An instance whose heartbeat does not say its keys (an older binary) adds none.
select coalesce(array_agg(distinct k.name order by k.name), '{}'::text[]) as names
from sume.instances i
cross join lateral unnest(i.api_keys) as k(name)
where i.last_seen > now() - interval '5 minutes'
  and ($1::bool
       or exists (select 1 from jsonb_each_text(i.tasks) t where t.value <> 'finished'));
