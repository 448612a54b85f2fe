-- Retention deletes: each takes at most $2 rows older than $1 seconds, in its own short
-- transaction, so no lock is held for long and ingest never waits behind it.

-- name: retention_events_applied
delete from sume.events
where event_id = any (array(
    select event_id from sume.events
    where applied_at is not null
      and applied_at < now() - make_interval(secs => $1)
    order by applied_at
    limit $2));

-- name: retention_events_set_aside
delete from sume.events
where event_id = any (array(
    select event_id from sume.events
    where set_aside_at is not null
      and applied_at is null
      and set_aside_at < now() - make_interval(secs => $1)
    order by set_aside_at
    limit $2));

-- name: retention_dead_letters
delete from sume.dead_letters
where dead_letter_id = any (array(
    select dead_letter_id from sume.dead_letters
    where received_at < now() - make_interval(secs => $1)
    order by received_at
    limit $2));

-- name: retention_inbox_checks
-- Foreign verdicts outlive their events by nothing: once the set-aside events are gone, so is
-- the check (an event arriving later for the same id starts a new one).
delete from sume.inbox_checks
where job_id = any (array(
    select c.job_id from sume.inbox_checks c
    where c.verdict = 'foreign'
      and c.checked_at < now() - make_interval(secs => $1)
      and not exists (select 1 from sume.events e where e.job_id = c.job_id)
    order by c.checked_at
    limit $2));
