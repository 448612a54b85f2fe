-- Statements on sume.events, the inbox.

-- name: events_insert
-- One ingest batch, sorted by event_id (so concurrent batches never deadlock on shared ids).
-- event_id is the key from the signed body; header_event_id is X-Sume-Event-Id as received, a
-- hint only. A row stored before 0004_signed_keys was keyed by the header's id: a delivery
-- whose header id names such a row of the same job and status is a redelivery of it, and is
-- not stored again. Job and status must match: the header's id is not signed, and another
-- job's row stored under it (an id claimed before the upgrade), or the same job's event of
-- another status (an id a buggy sender reused), must not hide a genuine delivery. Results come as JSON
-- text, exactly as received, and become jsonb here. Answers the ids that were new (what the
-- others hold, events_stored reads), each with whether its job's row existed in this
-- statement's snapshot: ingest hints attach only those, and the jobs registered since (see
-- attach.rs, "hints").
-- Both probes (the legacy row, the job's row) are per-row lookups by a key: `exists (...
-- offset 0)` keeps each a subplan run for its row, which PostgreSQL can neither turn into a
-- join nor hash. A plain `exists` here may be planned as `hashed SubPlan`, one read of the
-- whole table per batch, and a connection's generic plan made while the tables were empty
-- keeps that shape as they grow (tests/it/plans_from_empty.rs, docs/benchmarks.md, "Plans
-- made on an empty database").
with inserted as (
    insert into sume.events (event_id, job_id, event_type, status, result, body, signed_at,
                             signature, header_event_id)
    select u.event_id, u.job_id, u.event_type, u.status, u.result::jsonb, u.body, u.signed_at,
           u.signature, u.header_event_id
    from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[],
                $7::int8[], $8::text[], $9::text[])
         as u(event_id, job_id, event_type, status, result, body, signed_at, signature,
              header_event_id)
    where u.header_event_id is null
       or u.header_event_id = u.event_id
       or not exists (
            select 1 from sume.events legacy
            where legacy.event_id = u.header_event_id
              and legacy.job_id = u.job_id
              and legacy.status is not distinct from u.status
              and legacy.received_at < (select applied_at from sume.schema_migrations
                                        where version = 4)
            offset 0)
    on conflict (event_id) do nothing
    returning event_id, job_id
)
select i.event_id,
       exists (select 1 from sume.jobs j where j.job_id = i.job_id offset 0) as job_known
from inserted i;

-- name: events_stored
-- What the ids of a batch that events_insert did not write already hold: the job and status of
-- the row stored under each (run only when some id was not new, which a batch of new events
-- never pays for). Ingest tells a redelivery (the same job and status) from another event
-- reusing the id (another job, or another status of the same job), which it keeps as a dead
-- letter instead of answering it "duplicate". A row committed by another batch while this
-- one's insert waited on it is seen: this is a statement of its own, with a snapshot taken
-- after that insert. An id with no row (a delivery skipped as the redelivery of a row stored
-- before 0004_signed_keys under its header's id) answers nothing. Each id is a lookup in
-- events_pkey (`offset 0`: a subplan per id, never a join that could read sume.events whole).
select u.event_id, e.job_id, e.status
from (select distinct unnest($1::text[]) as event_id) u
cross join lateral (select w.job_id, w.status from sume.events w
                    where w.event_id = u.event_id
                    offset 0) e;

-- name: events_attachable
-- Which of these jobs have a committed row and events waiting. Takes no locks: a cheap filter
-- before attach locks anything. Driven by the ids asked about, one lookup in the jobs' primary
-- key each (`offset 0`: a subplan per id, never a join that could read sume.jobs whole): most
-- ids (events whose job is not registered yet) end there.
select u.job_id
from (select distinct unnest($1::text[]) as job_id) u
where exists (select 1 from sume.jobs j where j.job_id = u.job_id offset 0)
  and exists (select 1 from sume.events e
              where e.job_id = u.job_id and e.applied_at is null
              offset 0);

-- name: events_attachable_scan
-- The catch-up scan: waiting events whose job row exists (a lost notification, a crash, hints
-- dropped while attach was behind), oldest first from the index events_awaiting, stopping at
-- $1 rows: a scan costs the rows it returns plus the jobless events older than them. Past
-- INBOX_GRACE the sweep sets a foreign job's events aside and marks an orphan's (orphaned_at:
-- a key reads the job but it has no row, or no key can ask), and the index holds neither, so
-- the jobless events walked are at most those younger than the grace (or still being asked
-- about), however many orphans are kept: a backlog drains in batches of constant cost. A
-- marked event needs no look of its own: the job's registration clears its mark (the trigger
-- jobs_unmark_orphans, migration 13), which brings it back here. One row per event (a job
-- with two waiting events comes twice; the caller keeps one). A set-aside event attaches too
-- once its job is registered (the verdict was that no key of ours knew the job; a row says it
-- is ours after all): those are looked for only when the first part comes back short, from
-- the open jobs, since most set-aside events are another workspace's and never get a row:
-- read through the two partial indexes of open jobs (jobs_poll_first, jobs_poll_next), each
-- one's waiting events found by its id in events_job_id (`offset 0` keeps the set-aside test
-- outside, so the lookup cannot become a walk of every set-aside event, events_set_aside_at).
select job_id
from ((select e.job_id
       from sume.events e
       where e.applied_at is null
         and e.set_aside_at is null
         and e.orphaned_at is null
         and exists (select 1 from sume.jobs j where j.job_id = e.job_id)
       order by e.received_at
       limit $1)
      union all
      (select o.job_id
       from ((select job_id from sume.jobs where state = 'open' and next_poll_at is null)
             union all
             (select job_id from sume.jobs where state = 'open' and next_poll_at is not null)) o
       where exists (select 1
                     from (select e.set_aside_at from sume.events e
                           where e.job_id = o.job_id and e.applied_at is null
                           offset 0) w
                     where w.set_aside_at is not null)
       limit $1)) attachable
limit $1;

-- name: events_pending_for_jobs
-- Run after jobs_lock, so it sees every event committed before the lock was taken. In the
-- order they were stored; events of one ingest transaction share its received_at and have no
-- order among them (event_id only makes the listing stable): the fold takes them together.
-- Each job's events are found by its id in events_job_id, a lateral lookup per job, and
-- locked until the transaction ends: events_mark_applied then finds them by their row
-- address, which nobody else can change meanwhile.
select e.event_id, e.job_id, e.status, e.result::text as result, e.received_at,
       extract(epoch from clock_timestamp() - e.received_at)::float8 as waited
from (select distinct unnest($1::text[]) as job_id) u
cross join lateral (select w.event_id, w.job_id, w.status, w.result, w.received_at
                    from sume.events w
                    where w.job_id = u.job_id
                      and w.applied_at is null
                    for update) e
order by e.job_id, e.received_at, e.event_id;

-- name: events_mark_applied
-- The events of an attach, locked by events_pending_for_jobs in the same transaction: each
-- found by its key (a lateral lookup in events_pkey) and updated at that row address (a TID
-- scan), so no plan can join the batch to the whole of sume.events.
update sume.events e
set applied_at = now(),
    outcome    = t.outcome
from (select u.outcome, w.ctid as at
      from unnest($1::text[], $2::text[]) as u(event_id, outcome)
      cross join lateral (select ctid from sume.events w
                          where w.event_id = u.event_id and w.applied_at is null
                          offset 0) w) t
where e.ctid = t.at
  and e.applied_at is null;

-- name: events_set_aside_late_foreign
-- Events that arrived after their job id was judged foreign (every key the fleet held answered
-- 404) and have now waited longer than the grace ($1 seconds): set aside with the same
-- verdict, without asking Sume again. Answers how many. Should the job be registered after
-- all, attach still applies them (see events_attachable_scan).
update sume.events e
set set_aside_at     = coalesce($2, now()),
    set_aside_reason = 'foreign: judged before this event arrived, every key the fleet held answered 404 ('
                       || c.answers::text || ')'
from sume.inbox_checks c
where c.job_id = e.job_id
  and c.verdict = 'foreign'
  and e.applied_at is null
  and e.set_aside_at is null
  and e.orphaned_at is null
  and e.received_at < coalesce($2, now()) - make_interval(secs => $1)
  and not exists (select 1 from sume.jobs j where j.job_id = e.job_id);

-- name: events_set_aside
-- Sets aside the waiting events of a job every key reported unknown, unless its row exists, at
-- the clock ($3, or the database's when null): retention counts their age from it.
update sume.events e
set set_aside_at     = coalesce($3, now()),
    set_aside_reason = $2
where e.job_id = $1
  and e.applied_at is null
  and e.set_aside_at is null
  and not exists (select 1 from sume.jobs j where j.job_id = e.job_id);

-- name: events_orphan
-- Marks the waiting events of job id $1, which some key reads but which has no row (an orphan
-- verdict), at the clock ($2, or the database's when null): they leave events_awaiting, so
-- neither the catch-up scan nor the inbox checks walk them again. The job's registration
-- clears the mark (the trigger jobs_unmark_orphans) and attach applies them; otherwise after
-- ORPHAN_RETENTION they move to the dead letters (events_expire_orphans).
update sume.events e
set orphaned_at = coalesce($2, now())
where e.job_id = $1
  and e.applied_at is null
  and e.set_aside_at is null
  and e.orphaned_at is null
  and not exists (select 1 from sume.jobs j where j.job_id = e.job_id);

-- name: events_orphan_late
-- Marks as events_orphan does, at most $3 at a time, the events that waited more than $1
-- seconds by the clock ($4, or the database's when null) with no job row and that nobody will
-- ask about: their job id is an orphan already (they came after the verdict), or no key is
-- configured on this instance nor on any live instance of the fleet ($2, read apart by
-- instances_keyed_live, so that an instance with keys never reads sume.instances here: a
-- generic plan checks the rights of every table a statement names), so every such event.
-- Oldest first through events_awaiting: a pass costs the events it marks plus those past the
-- grace still being asked about. Answers how many.
update sume.events e
set orphaned_at = coalesce($4, now())
where e.event_id = any (array(
    select w.event_id from sume.events w
    where w.applied_at is null
      and w.set_aside_at is null
      and w.orphaned_at is null
      and w.received_at < coalesce($4, now()) - make_interval(secs => $1)
      and not exists (select 1 from sume.jobs j where j.job_id = w.job_id)
      and ($2
           or exists (select 1 from sume.inbox_checks c
                      where c.job_id = w.job_id and c.verdict = 'orphan'))
    order by w.received_at
    limit $3))
  and e.applied_at is null
  and e.orphaned_at is null;

-- name: events_expire_orphans
-- ORPHAN_RETENTION (see sweep/retention.rs): at most $2 events that waited more than $1 seconds
-- by the clock ($3, or the database's when null) for a job row that never came leave the
-- inbox for sume.dead_letters, in one statement: the event row is deleted and a dead letter
-- keyed by its event id keeps the body and signature as received, so `replay --dead-letters`
-- stores and attaches it once the job is registered. The dead letter counts its
-- DEAD_LETTER_RETENTION from now; the reason says when the event came and what the sweep knew.
-- Found oldest first through events_pending (marked or not); an event whose row exists is
-- left to attach. An event applied meanwhile (its job registered while this ran) is kept: the
-- delete checks applied_at again on the row it locks. Answers each moved event's job id.
with expired as (
    delete from sume.events e
    where e.event_id = any (array(
        select w.event_id from sume.events w
        where w.applied_at is null
          and w.set_aside_at is null
          and w.received_at < coalesce($3, now()) - make_interval(secs => $1)
          and not exists (select 1 from sume.jobs j where j.job_id = w.job_id)
        order by w.received_at
        limit $2))
      and e.applied_at is null
      and e.set_aside_at is null
    returning e.event_id, e.job_id, e.body, e.header_event_id, e.signed_at, e.signature,
              e.received_at
), kept as (
    insert into sume.dead_letters (dead_letter_id, reason, body, header_event_id, signed_at,
                                   signature, received_at)
    select x.event_id,
           'no job row within ORPHAN_RETENTION: an event of job ' || x.job_id
             || ' received ' || to_char(x.received_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
             || coalesce((select case c.verdict
                                     when 'orphan' then ', an orphan (a key reads the job: '
                                                        || c.answers::text || ')'
                                     else ', never judged (Sume''s answers: '
                                          || c.answers::text || ')' end
                          from sume.inbox_checks c where c.job_id = x.job_id),
                         ', never asked about (no SUME_API_KEYS, or Sume''s answers held)'),
           x.body, x.header_event_id, x.signed_at, x.signature, coalesce($3, now())
    from expired x
    on conflict (dead_letter_id) do update
        set reason      = excluded.reason,
            received_at = excluded.received_at,
            replayed_at = null
)
select job_id from expired;

-- name: events_orphan_unmark_registered
-- ORPHAN_RETENTION's safety net (see sweep/retention.rs): a marked event whose job row exists
-- after all (a registration that committed while the marking statement ran, after its trigger
-- found nothing to clear) loses its mark, so the catch-up scan attaches it; at most $2 of
-- those older than $1 seconds by the clock ($3, or the database's when null), found oldest
-- first through events_pending next to the events that events_expire_orphans moves.
update sume.events e
set orphaned_at = null
where e.event_id = any (array(
    select w.event_id from sume.events w
    where w.applied_at is null
      and w.set_aside_at is null
      and w.orphaned_at is not null
      and w.received_at < coalesce($3, now()) - make_interval(secs => $1)
      and exists (select 1 from sume.jobs j where j.job_id = w.job_id)
    order by w.received_at
    limit $2))
  and e.orphaned_at is not null;

-- name: events_orphan_unmark_askable
-- An instance with keys asks again about the events marked while no key could ask (without
-- SUME_API_KEYS on any live instance, events_orphan_late marks every jobless event past the
-- grace): a marked event whose job id has no orphan verdict (no key read the job) loses its
-- mark, so it is back in events_awaiting, oldest of all, and the regular inbox check opens its
-- job id's check and asks every key the fleet holds. An orphan's events keep their mark (a
-- key reads the job; it has no row). A step walks at most $3 waiting events through
-- events_pending in (received_at, event_id) order after the cursor ($1, $2; nulls: from the
-- first), marked or not, so a step costs the same however large the backlog; the
-- caller carries the cursor from step to step and starts over once a walk comes back short.
-- Answers how many were unmarked, how many walked, and the last one walked (the next cursor).
with walked as (
    select w.event_id, w.received_at, w.orphaned_at is not null as marked
    from sume.events w
    where w.applied_at is null
      and w.set_aside_at is null
      and (w.received_at, w.event_id)
          > (coalesce($1::timestamptz, '-infinity'), coalesce($2::text, ''))
    order by w.received_at, w.event_id
    limit $3
), unmarked as (
    update sume.events e
    set orphaned_at = null
    where e.event_id = any (array(select m.event_id from walked m where m.marked))
      and e.applied_at is null
      and e.set_aside_at is null
      and e.orphaned_at is not null
      and not exists (select 1 from sume.inbox_checks c
                      where c.job_id = e.job_id and c.verdict = 'orphan')
    returning e.event_id
), last as (
    select l.received_at, l.event_id from walked l
    order by l.received_at desc, l.event_id desc
    limit 1
)
select (select count(*) from unmarked) as unmarked,
       (select count(*) from walked) as walked,
       (select l.received_at from last l) as last_received_at,
       (select l.event_id from last l) as last_event_id;

-- name: events_waiting_list
-- The inbox as an operator sees it: events not applied and not set aside, at least $1 seconds
-- old, oldest first, with whether their job row exists and what the sweep concluded.
select e.event_id, e.job_id, e.event_type, e.status, e.received_at,
       extract(epoch from now() - e.received_at)::float8 as age_secs,
       exists (select 1 from sume.jobs j where j.job_id = e.job_id) as job_exists,
       (select c.verdict from sume.inbox_checks c where c.job_id = e.job_id) as verdict
from sume.events e
where e.applied_at is null
  and e.set_aside_at is null
  and e.received_at <= now() - make_interval(secs => $1)
order by e.received_at
limit $2;

-- name: events_get
select event_id, job_id, event_type, status, body, signed_at, signature, received_at,
       applied_at, outcome, set_aside_at, set_aside_reason
from sume.events
where event_id = $1;

-- name: events_unset_aside
-- Replay of a set-aside event: back into the inbox, to be attached like any other.
update sume.events
set set_aside_at = null,
    set_aside_reason = null
where event_id = $1
  and applied_at is null
  and set_aside_at is not null;

-- name: events_delete_applied
-- Retention (see db/retention.rs): at most $2 rows older than $1 seconds by the clock ($3, or
-- the database's when null), in its own short transaction, so no lock is held for long and
-- ingest never waits behind it.
delete from sume.events
where event_id = any (array(
    select event_id from sume.events
    where applied_at is not null
      and applied_at < coalesce($3, now()) - make_interval(secs => $1)
    order by applied_at
    limit $2));

-- name: events_delete_set_aside
-- Retention (see db/retention.rs): at most $2 rows older than $1 seconds by the clock ($3, or
-- the database's when null), in its own short transaction, so no lock is held for long and
-- ingest never waits behind it.
delete from sume.events
where event_id = any (array(
    select event_id from sume.events
    where set_aside_at is not null
      and applied_at is null
      and set_aside_at < coalesce($3, now()) - make_interval(secs => $1)
    order by set_aside_at
    limit $2));

-- name: events_waiting_page
-- The inbox for the admin API: like events_waiting_list, keyset-paged in (received_at,
-- event_id) order after ($2, $3) (null: from the oldest), at most $4.
select e.event_id, e.job_id, e.event_type, e.status, e.received_at,
       extract(epoch from now() - e.received_at)::float8 as age_secs,
       exists (select 1 from sume.jobs j where j.job_id = e.job_id) as job_exists,
       (select c.verdict from sume.inbox_checks c where c.job_id = e.job_id) as verdict
from sume.events e
where e.applied_at is null
  and e.set_aside_at is null
  and e.received_at <= now() - make_interval(secs => $1)
  and ($2::timestamptz is null or (e.received_at, e.event_id) > ($2, $3::text))
order by e.received_at, e.event_id
limit $4;

-- name: events_set_aside_page
-- Events set aside as not ours, with why and every key's answer (the audit of the verdict),
-- keyset-paged in (set_aside_at, event_id) order after ($1, $2) (null: from the first), at
-- most $3.
select e.event_id, e.job_id, e.status, e.received_at, e.set_aside_at, e.set_aside_reason,
       c.answers, c.checked_at
from sume.events e
left join sume.inbox_checks c on c.job_id = e.job_id
where e.set_aside_at is not null
  and e.applied_at is null
  and ($1::timestamptz is null or (e.set_aside_at, e.event_id) > ($1, $2::text))
order by e.set_aside_at, e.event_id
limit $3;
