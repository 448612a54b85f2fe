-- Statements on sume.inbox_checks: stale inbox rows checked against Sume's status endpoint.

-- name: inbox_checks_enqueue
-- Opens a check for every job id whose events have waited more than $1 seconds with no job row
-- and no check yet; at most $2 at a time. Served by events_awaiting (waiting events by age,
-- without the orphans' events, which are marked once judged). The clock is $3, or the
-- database's own when $3 is null (always, outside tests). The two probes are lookups by key
-- for each event walked (`offset 0`: subplans, never an anti-join that could read sume.jobs
-- whole).
insert into sume.inbox_checks (job_id)
select distinct e.job_id
from sume.events e
where e.applied_at is null
  and e.set_aside_at is null
  and e.orphaned_at is null
  and e.received_at < coalesce($3, now()) - make_interval(secs => $1)
  and not exists (select 1 from sume.jobs j where j.job_id = e.job_id offset 0)
  and not exists (select 1 from sume.inbox_checks c where c.job_id = e.job_id offset 0)
limit $2
on conflict (job_id) do nothing;

-- name: inbox_checks_claim
-- Claims up to $2 due checks for instance $1 until the clock + $3 seconds (the clock: $4, or
-- the database's when null), with the answers earlier looks recorded; only those it can move
-- forward: a key of its own ($5) has not answered 404 yet, or every key the fleet holds ($6,
-- its own among them) has. A check every key of this instance answered 404 for waits for an
-- instance holding a key still to answer (a key reads only its member's jobs), or for that
-- key's holders to be gone. A single instance, or a fleet holding one set of keys, always has
-- a key of its own still to answer on a pending check.
with due as (
    select c.job_id
    from sume.inbox_checks c
    where c.verdict = 'pending'
      and c.next_check_at <= coalesce($4, now())
      and (c.lease_until is null or c.lease_until < coalesce($4, now()))
      and (exists (select 1 from unnest($5::text[]) k(name)
                   where (c.answers ->> k.name) is distinct from '404')
           or not exists (select 1 from unnest($6::text[]) k(name)
                          where (c.answers ->> k.name) is distinct from '404'))
    order by c.next_check_at
    limit $2
    for update skip locked
)
update sume.inbox_checks c
set lease_owner = $1,
    lease_until = coalesce($4, now()) + make_interval(secs => $3)
from due
where c.job_id = due.job_id
returning c.job_id, c.attempts, c.answers, c.lease_until;

-- name: inbox_checks_retry
-- Inconclusive (429, 5xx, timeout, a key refused): try again $4 seconds after the clock ($5,
-- or the database's when null). Or every key asked answered 404 while a key another instance
-- holds has not: $4 is 0, due at once for that instance. $3 holds every key's answer so far,
-- the earlier looks' with this one's.
update sume.inbox_checks
set answers       = $3,
    attempts      = attempts + 1,
    checked_at    = coalesce($5, now()),
    next_check_at = coalesce($5, now()) + make_interval(secs => $4),
    lease_owner   = null,
    lease_until   = null
where job_id = $1
  and lease_owner = $2;

-- name: inbox_checks_verdict
-- A verdict: 'foreign' (every key the fleet holds answered 404, in this look or an earlier
-- one) or 'orphan' (a key can read it; no row), at the clock ($5, or the database's when
-- null): retention counts a foreign check's age from it.
update sume.inbox_checks
set verdict     = $3,
    answers     = $4,
    attempts    = attempts + 1,
    checked_at  = coalesce($5, now()),
    lease_owner = null,
    lease_until = null
where job_id = $1
  and lease_owner = $2
  and verdict = 'pending';

-- name: inbox_checks_drop
-- The job row appeared while it was being checked: attach owns it now.
delete from sume.inbox_checks
where job_id = $1
  and lease_owner = $2;

-- name: inbox_checks_release
update sume.inbox_checks
set lease_owner = null,
    lease_until = null
where job_id = any($1)
  and lease_owner = $2;

-- name: inbox_checks_forget
-- Replay of a set-aside event: the foreign verdict no longer stands.
delete from sume.inbox_checks
where job_id = $1
  and verdict = 'foreign';

-- name: inbox_checks_resolve_orphans
-- An orphan whose row has come back (restored, re-registered) is an orphan no more: attach owns
-- its events again, and they lose their mark, so the catch-up scan finds any its notification
-- missed. Served by inbox_checks_orphans; orphans are few (they end at ORPHAN_RETENTION).
-- Answers how many job ids were resolved.
with resolved as (
    delete from sume.inbox_checks c
    where c.verdict = 'orphan'
      and exists (select 1 from sume.jobs j where j.job_id = c.job_id)
    returning c.job_id
), unmarked as (
    update sume.events e
    set orphaned_at = null
    from resolved r
    where e.job_id = r.job_id
      and e.applied_at is null
      and e.orphaned_at is not null
)
select count(*) from resolved;

-- name: inbox_checks_delete_settled
-- Retention (see db/retention.rs): at most $2 rows older than $1 seconds by the clock ($3, or
-- the database's when null), in its own short transaction, so no lock is held for long and
-- ingest never waits behind it.
-- Foreign verdicts outlive their events by nothing: once the set-aside events are gone, so is
-- the check (an event arriving later for the same id starts a new one).
delete from sume.inbox_checks
where job_id = any (array(
    select c.job_id from sume.inbox_checks c
    where c.verdict = 'foreign'
      and c.checked_at < coalesce($3, now()) - make_interval(secs => $1)
      and not exists (select 1 from sume.events e where e.job_id = c.job_id)
    order by c.checked_at
    limit $2));

-- name: inbox_checks_delete_expired_orphans
-- ORPHAN_RETENTION (see db/retention.rs): an orphan verdict older than $1 seconds by the clock
-- ($3, or the database's when null) whose events have all left the inbox
-- (events_expire_orphans moved them to the dead letters) goes too, at most $2 at a time,
-- oldest first through inbox_checks_orphans: the orphan is then told by the dead letters and
-- sume_inbox_orphan_events_expired_total, and an event arriving later starts a new check.
delete from sume.inbox_checks
where job_id = any (array(
    select c.job_id from sume.inbox_checks c
    where c.verdict = 'orphan'
      and c.created_at < coalesce($3, now()) - make_interval(secs => $1)
      and not exists (select 1 from sume.events e
                      where e.job_id = c.job_id and e.applied_at is null)
    order by c.created_at
    limit $2))
  and verdict = 'orphan';

-- name: inbox_checks_orphans_page
-- Orphans: job ids Sume knows (a key can read them) with events but no row, the oldest check
-- first: keyset-paged in (created_at, job_id) order after ($1, $2) (null: from the first), at
-- most $3, with the keys' answers and the waiting events.
select c.job_id, c.answers, c.checked_at, c.created_at,
       (select count(*) from sume.events e
         where e.job_id = c.job_id and e.applied_at is null) as waiting_events
from sume.inbox_checks c
where c.verdict = 'orphan'
  and ($1::timestamptz is null or (c.created_at, c.job_id) > ($1, $2::text))
order by c.created_at, c.job_id
limit $3;
