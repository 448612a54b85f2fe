-- The demo's own statements on sume.events (the daemon's are in sql/queries/events.sql).

-- name: events_closed
-- When the closing event of each of the demo's jobs ($1: their ids) arrived.
select job_id, received_at from sume.events where outcome = 'closed' and job_id = any($1);

-- name: events_count
-- Every event stored: deliveries accepted minus this is the duplicates absorbed.
select count(*) from sume.events;

-- name: events_count_set_aside
select count(*) from sume.events where set_aside_at is not null;

-- name: events_count_pending
-- Events still waiting that are neither applied nor set aside.
select count(*) from sume.events where applied_at is null and set_aside_at is null;
