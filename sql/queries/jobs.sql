-- Statements on sume.jobs. Each starts with a `-- name:` line and becomes a constant of
-- db::sql (jobs_insert is JOBS_INSERT), so a misspelt name fails the build.

-- name: jobs_insert
-- Registration through the API; the application's own path is the same insert in its
-- transaction. $4: the request's W3C traceparent, if any (the close's trace links to it).
insert into sume.jobs (job_id, order_id, api_key, traceparent)
values ($1, $2, $3, $4)
on conflict (job_id) do nothing;

-- name: jobs_traceparents
-- The registrations' traceparents of jobs just closed (read only while traces are exported).
select job_id, traceparent from sume.jobs
where job_id = any($1::text[]) and traceparent is not null;

-- name: jobs_get
select job_id, order_id, api_key, state, sume_status, closed_by, closed_event_id,
       result::text as result, created_at, updated_at, closed_at, close_reason,
       superseded_give_up
from sume.jobs
where job_id = $1;

-- name: jobs_story
-- Everything known about job id $1, in one statement and so one snapshot (the console's job
-- page, `jobs show`, GET /v1/jobs/{id}/detail): the row, the events oldest first (signed_at:
-- the X-Sume-Timestamp they were signed with, verified at ingest, so a valid time), the
-- disagreements, the inbox check and the kept polls, each as JSON and each found by an index
-- on the job id (the primary keys, events_job_id, disagreements_job_id). The job comes as JSON
-- text, so its result's numbers are read with every digit.
select
    (select to_jsonb(j)::text
     from (select job_id, order_id, api_key, state, sume_status, closed_by, created_at,
                  closed_at, result, close_reason, superseded_give_up
           from sume.jobs where job_id = $1) j) as job,
    (select coalesce(jsonb_agg(to_jsonb(e) order by e.received_at, e.event_id), '[]')
     from (select event_id, event_type, status, to_timestamp(signed_at) as signed_at,
                  received_at, applied_at, outcome, set_aside_at, set_aside_reason
           from sume.events where job_id = $1) e) as events,
    (select coalesce(jsonb_agg(to_jsonb(d) - 'id' order by d.id), '[]')
     from (select id, kept_state, seen_state, seen_status, source, event_id, recorded_at
           from sume.disagreements where job_id = $1) d) as disagreements,
    (select to_jsonb(c)
     from (select verdict, answers, attempts, checked_at, next_check_at
           from sume.inbox_checks where job_id = $1) c) as inbox_check,
    (select coalesce(jsonb_agg(to_jsonb(p) order by p.seq), '[]')
     from (select seq, polled_at, key_name, answer, latency_ms
           from sume.job_polls where job_id = $1) p) as polls;

-- name: jobs_lock
-- Serialises every writer of these jobs (attach on any instance, the poll) for one transaction.
-- Sorted, so two batches that share jobs never lock them in opposite orders: the ids are
-- sorted first and each row is found and locked in that order by a lateral lookup in the
-- primary key (never a scan of sume.jobs, whatever the plan was made from).
select j.job_id, j.state, j.sume_status, j.closed_by
from (select distinct unnest($1::text[]) as job_id order by 1) u
cross join lateral (select job_id, state, sume_status, closed_by
                    from sume.jobs
                    where job_id = u.job_id
                    for update) j
order by u.job_id;

-- name: jobs_apply
-- The outcome of one attach or poll, computed under jobs_lock. Guarded all the same: a job
-- closed by Sume's word never changes state, and closed_at is set once. The one exception is
-- a give-up ($7, supersedes): Sume's terminal status replaces the guess, which is kept in
-- superseded_give_up. The result ($6) comes as JSON text, as attach read it from the event
-- (`result::text`), so its numbers keep every digit. Each row is found by its key (a lateral lookup in the primary key) and
-- updated at that row address (a TID scan): jobs_lock holds it, so the address cannot change
-- under this transaction, and no plan can join the batch to the whole of sume.jobs.
update sume.jobs j
set state              = u.state,
    sume_status        = u.sume_status,
    closed_by          = case when u.supersedes then u.closed_by
                              else coalesce(j.closed_by, u.closed_by) end,
    closed_event_id    = case when u.supersedes then u.closed_event_id
                              else coalesce(j.closed_event_id, u.closed_event_id) end,
    result             = coalesce(u.result::jsonb, j.result),
    closed_at          = case when u.supersedes then now()
                              when u.state <> 'open' then coalesce(j.closed_at, now()) end,
    superseded_give_up = case when u.supersedes
                              then jsonb_build_object('state', j.state,
                                                      'sume_status', j.sume_status,
                                                      'closed_at', j.closed_at,
                                                      'reason', j.close_reason)
                              else j.superseded_give_up end,
    close_reason       = case when u.supersedes then null else j.close_reason end,
    updated_at         = now()
from (select x.*, r.ctid as at
      from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                  $7::bool[])
           as x(job_id, state, sume_status, closed_by, closed_event_id, result, supersedes)
      cross join lateral (select ctid from sume.jobs where job_id = x.job_id offset 0) r) u
where j.ctid = u.at
  and (j.state = 'open'
       or j.state = u.state
       or (u.supersedes and j.closed_by = 'give_up'));

-- name: jobs_poll_now
-- Jobs whose webhooks contradicted each other with no order to tell them apart (two different
-- terminal events stored together: see job_fold.rs): due for a poll at once, so Sume's own
-- answer settles them. Run in the attach transaction that recorded the disagreement.
-- Found as jobs_apply finds its rows (under jobs_lock, by key then by row address).
update sume.jobs j
set next_poll_at = now()
from (select r.ctid as at
      from unnest($1::text[]) as x(job_id)
      cross join lateral (select ctid from sume.jobs where job_id = x.job_id offset 0) r) u
where j.ctid = u.at
  and j.state = 'open';

-- name: jobs_claim_due
-- Claims up to $2 open jobs that are due a poll for instance $1 until the clock + $3 seconds.
-- Due: never polled and created at least $4 seconds ago, or rescheduled to the clock or
-- earlier. Skips rows another transaction holds, rows under another instance's live lease,
-- jobs of the keys in $6 (their jobs are settled by walks of the key's list instead), and jobs
-- naming a key not in $7, this instance's keys: another key's 404 says nothing of them, so
-- only an instance holding their key asks about them.
-- The clock is $5, or the database's own when $5 is null (always, outside tests); age_secs is
-- the job's age by the same clock, for the give-up.
with due as (
    select job_id
    from sume.jobs
    where state = 'open'
      and ((next_poll_at is null
            and created_at <= coalesce($5, now()) - make_interval(secs => $4))
           or next_poll_at <= coalesce($5, now()))
      and (lease_until is null or lease_until < coalesce($5, now()))
      and (api_key is null or not (api_key = any($6::text[])))
      and (api_key is null or api_key = any($7::text[]))
    order by coalesce(next_poll_at, created_at)
    limit $2
    for update skip locked
)
update sume.jobs j
set lease_owner = $1,
    lease_until = coalesce($5, now()) + make_interval(secs => $3)
from due
where j.job_id = due.job_id
returning j.job_id, j.api_key, j.created_at, j.poll_attempts, j.lease_until,
          extract(epoch from coalesce($5, now()) - j.created_at)::float8 as age_secs;

-- name: jobs_open_by_key
-- Open jobs per key name: how many; how many were registered at least $1 seconds before the
-- clock ($2) (what a walk of the key's list would settle); how many one-by-one polls fall
-- due within $3 seconds of the clock (what reading them by themselves would cost meanwhile);
-- and the earliest own poll among them (never polled: $1 seconds after registration), when
-- the key's next walk falls due unless its pace says later.
-- Read through the two partial indexes of open jobs, so its cost follows the open jobs.
select api_key,
       count(*) filter (where created_at <= coalesce($2, now()) - make_interval(secs => $1))::int8,
       count(*)::int8,
       count(*) filter (where due <= coalesce($2, now()) + make_interval(secs => $3))::int8,
       min(due) as oldest_poll
from (select api_key, created_at, created_at + make_interval(secs => $1) as due
      from sume.jobs where state = 'open' and next_poll_at is null
      union all
      select api_key, created_at, next_poll_at
      from sume.jobs where state = 'open' and next_poll_at is not null) o
group by api_key;

-- name: jobs_claim_walk
-- Claims, for instance $1's walk of key $2's list, up to $3 open jobs of that key registered
-- at least $5 seconds before the clock ($6), oldest first, until the clock + $4 seconds; rows
-- another transaction holds or another instance leases are skipped. Answers as jobs_claim_due,
-- and whether each job's own poll is due (one the list does not show is read only then).
with candidates as (
    select job_id from sume.jobs
    where state = 'open' and next_poll_at is null and api_key = $2
      and created_at <= coalesce($6, now()) - make_interval(secs => $5)
    union all
    select job_id from sume.jobs
    where state = 'open' and next_poll_at is not null and api_key = $2
      and created_at <= coalesce($6, now()) - make_interval(secs => $5)
), due as (
    select j.job_id
    from sume.jobs j
    join candidates c on c.job_id = j.job_id
    where j.state = 'open'
      and (j.lease_until is null or j.lease_until < coalesce($6, now()))
    order by j.created_at
    limit $3
    for update of j skip locked
)
update sume.jobs j
set lease_owner = $1,
    lease_until = coalesce($6, now()) + make_interval(secs => $4)
from due
where j.job_id = due.job_id
returning j.job_id, j.api_key, j.created_at, j.poll_attempts, j.lease_until,
          extract(epoch from coalesce($6, now()) - j.created_at)::float8 as age_secs,
          coalesce(j.next_poll_at <= coalesce($6, now()), true) as poll_due;

-- name: jobs_poll_done
-- After a poll that did not close the job: the answer seen and the next poll time, $5 seconds
-- after the clock ($6, or the database's when null); releases the lease. Only the lease holder
-- may write, so a takeover after expiry is not clobbered. An in-flight status read by the poll
-- is not written here: it goes through the fold under the job's row lock (jobs_apply), like
-- every other observation, so it cannot overwrite what a webhook wrote meanwhile.
update sume.jobs
set last_polled_at   = coalesce($6, now()),
    last_poll_answer = $3,
    poll_attempts    = poll_attempts + $4,
    next_poll_at     = coalesce($6, now()) + make_interval(secs => $5),
    lease_owner      = null,
    lease_until      = null,
    updated_at       = coalesce($6, now())
where job_id = $1
  and lease_owner = $2
  and state = 'open';

-- name: jobs_release
-- Gives claimed jobs back untouched (shutdown, no budget left): due again at once.
update sume.jobs
set lease_owner = null,
    lease_until = null
where job_id = any($1)
  and lease_owner = $2;

-- name: jobs_give_up
-- Closes a job nobody could settle within POLL_GIVE_UP as expired, with the reason and the
-- last in-flight status read ($4, if any), at the clock ($5, or the database's when null).
-- When the give-up is made blind (no answer about the job from Sume) and GIVE_UP_RECHECK is
-- on, the job is to be asked about again until the clock + $6 seconds, first $7 seconds after
-- the clock ($6 null: not). Answers how many jobs were given up (0 or 1).
with closed as (
    update sume.jobs
    set state        = 'expired',
        sume_status  = coalesce($4, sume_status),
        closed_by    = 'give_up',
        close_reason = $3,
        closed_at    = coalesce($5, now()),
        lease_owner  = null,
        lease_until  = null,
        updated_at   = coalesce($5, now())
    where job_id = $1
      and lease_owner = $2
      and state = 'open'
    returning job_id
), recheck as (
    insert into sume.give_up_rechecks (job_id, until_at, next_at)
    select job_id,
           coalesce($5, now()) + make_interval(secs => $6::float8),
           coalesce($5, now()) + make_interval(secs => $7::float8)
    from closed
    where $6::float8 is not null
    on conflict (job_id) do nothing
)
select count(*)::int8 from closed;

-- name: jobs_poll_closed
-- Records the poll that closed a job (the close itself is jobs_apply) and releases the lease.
-- The clock is $4, or the database's own when null.
update sume.jobs
set last_polled_at   = coalesce($4, now()),
    last_poll_answer = $3,
    poll_attempts    = poll_attempts + 1,
    lease_owner      = null,
    lease_until      = null
where job_id = $1
  and lease_owner = $2;

-- name: jobs_lock_shared
-- Holds a job id against a concurrent registration for one transaction: the row either exists
-- now, or its insert waits for this transaction and then sees what it wrote.
select 1 from sume.jobs where job_id = $1 for share;

-- name: jobs_listen
-- The trigger sume.jobs_notify (0001_init.sql) sends each new job id on this channel.
listen sume_jobs;

-- name: jobs_delete_closed
-- JOB_RETENTION (off by default; see sweep/retention.rs): at most $2 jobs closed more than $1
-- seconds ago by the clock ($3, or the database's when null), with their disagreements; answers
-- how many jobs went. No index serves it (closed jobs have none: the sweep never reads them), so
-- it is a sequential scan that stops at $2 rows, run once an hour rather than every pass. A
-- give-up still to be asked about again (its recheck's window not over) is kept: Sume's answer
-- may yet replace it.
with gone as (
    delete from sume.jobs
    where job_id = any (array(
        select j.job_id from sume.jobs j
        where j.state <> 'open'
          and j.closed_at < coalesce($3, now()) - make_interval(secs => $1)
          and not exists (select 1 from sume.give_up_rechecks r
                          where r.job_id = j.job_id and r.until_at > coalesce($3, now()))
        limit $2))
      and state <> 'open'
    returning job_id
), disagreements as (
    delete from sume.disagreements d using gone where d.job_id = gone.job_id
)
select count(*) from gone;

-- name: jobs_list
-- A page of jobs in job_id order after $1 (keyset), each filter ignored when null: state $2,
-- order_id $3, closed_by $4, created in [$5, $6), closed in [$7, $8); at most $9 rows. The
-- primary key drives the order; a filter that matches few jobs reads more rows per page.
select job_id, order_id, api_key, state, sume_status, closed_by, closed_event_id,
       result::text as result, created_at, updated_at, closed_at, close_reason,
       superseded_give_up
from sume.jobs
where job_id > $1
  and ($2::text is null or state = $2)
  and ($3::text is null or order_id = $3)
  and ($4::text is null or closed_by = $4)
  and ($5::timestamptz is null or created_at >= $5)
  and ($6::timestamptz is null or created_at < $6)
  and ($7::timestamptz is null or closed_at >= $7)
  and ($8::timestamptz is null or closed_at < $8)
order by job_id
limit $9;

-- name: jobs_closed_among
-- Which of these jobs are closed: the polled wake-up of the waiters (WAIT_WAKEUP=poll).
select job_id from sume.jobs where job_id = any($1) and state <> 'open';

-- name: jobs_list_by_order
-- `jobs_list` for one order id ($3, never null): the order's jobs in job_id order from the
-- index jobs_order_id, whatever the size of the table. The other filters as in `jobs_list`.
select job_id, order_id, api_key, state, sume_status, closed_by, closed_event_id,
       result::text as result, created_at, updated_at, closed_at, close_reason,
       superseded_give_up
from sume.jobs
where order_id = $3
  and job_id > $1
  and ($2::text is null or state = $2)
  and ($4::text is null or closed_by = $4)
  and ($5::timestamptz is null or created_at >= $5)
  and ($6::timestamptz is null or created_at < $6)
  and ($7::timestamptz is null or closed_at >= $7)
  and ($8::timestamptz is null or closed_at < $8)
order by order_id, job_id
limit $9;
