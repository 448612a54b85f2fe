-- The benchmark's own statements on sume.events (the daemon's are in sql/queries/events.sql).

-- name: events_insert_one
-- The per-request baseline: one row per request, committed on its own.
insert into sume.events (event_id, job_id, event_type, status, result, body, signed_at, signature)
values ($1, $2, $3, $4, $5::text::jsonb, $6, $7, $8)
on conflict (event_id) do nothing;

-- name: events_count
select count(*) from sume.events;

-- name: events_truncate
-- Empties the inbox before a step (dead letters too).
truncate sume.events, sume.dead_letters;

-- name: events_analyze
analyze sume.events;

-- name: events_vacuum_analyze
vacuum analyze sume.events;

-- name: events_seed_completed
-- The attach stage: one completed event per job job_1 .. job_$1, as ingest stores them.
insert into sume.events (event_id, job_id, event_type, status, body, signed_at, signature)
select 'evt_' || g, 'job_' || g, 'job.completed', 'completed',
       convert_to('{"event":"job.completed","job_id":"job_' || g || '"}', 'UTF8'),
       0, 'v1=00'
from generate_series(1, $1::int) g;

-- name: events_seed_closed
-- The sweep stage: the applied events of $1 jobs closed two days ago.
insert into sume.events (event_id, job_id, status, body, signed_at, signature,
                         received_at, applied_at, outcome)
select 'evt_' || g, 'done_' || g, 'completed', '\x7b7d', 0, 'v1=00',
       now() - interval '2 days', now() - interval '2 days', 'closed'
from generate_series(1, $1::int) g;

-- name: events_lock
-- The chaos suite: the inbox locked against every write (inside a transaction).
lock table sume.events in access exclusive mode;

-- name: events_received_ids
-- The chaos suite: every delivery the inbox holds, by the id it was sent with: the events
-- (their key, and the header id they carried) and the dead letters' header ids.
select event_id from sume.events
union
select header_event_id from sume.events where header_event_id is not null
union
select header_event_id from sume.dead_letters where header_event_id is not null;
