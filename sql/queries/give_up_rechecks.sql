-- Statements on sume.give_up_rechecks: give-ups decided blind, asked about again.

-- name: give_up_rechecks_claim
-- Claims up to $2 rechecks due by the clock ($4, or the database's when null) for instance $1
-- until the clock + $3 seconds, with the job's key name; skips rows another transaction holds,
-- rows under another instance's live lease, and jobs naming a key not in $5, this instance's
-- keys (only an instance holding a job's key asks about it).
with due as (
    select r.job_id
    from sume.give_up_rechecks r
    where r.next_at <= coalesce($4, now())
      and r.until_at >= coalesce($4, now())
      and (r.lease_until is null or r.lease_until < coalesce($4, now()))
      and exists (select 1 from sume.jobs j
                  where j.job_id = r.job_id and (j.api_key is null or j.api_key = any($5::text[])))
    order by r.next_at
    limit $2
    for update of r skip locked
)
update sume.give_up_rechecks r
set lease_owner = $1,
    lease_until = coalesce($4, now()) + make_interval(secs => $3)
from due, sume.jobs j
where r.job_id = due.job_id
  and j.job_id = r.job_id
returning r.job_id, j.api_key, r.attempts;

-- name: give_up_rechecks_again
-- Job $1 got no answer again: record it ($3) and ask again $4 seconds after the clock ($5), or
-- stop asking when that is past the recheck's end. Guarded by instance $2's lease.
with asked as (
    update sume.give_up_rechecks
    set attempts    = attempts + 1,
        last_answer = $3,
        next_at     = coalesce($5, now()) + make_interval(secs => $4),
        lease_owner = null,
        lease_until = null
    where job_id = $1
      and lease_owner = $2
    returning job_id, next_at, until_at
)
delete from sume.give_up_rechecks r
using asked
where r.job_id = asked.job_id
  and asked.next_at > asked.until_at;

-- name: give_up_rechecks_done
-- Stops asking about job $1 (settled, or the give-up stands), under instance $2's lease.
delete from sume.give_up_rechecks
where job_id = $1
  and lease_owner = $2;

-- name: give_up_rechecks_release
-- Gives claims back untouched (nothing could be asked: no read to spare).
update sume.give_up_rechecks
set lease_owner = null,
    lease_until = null
where job_id = any($1::text[])
  and lease_owner = $2;

-- name: give_up_rechecks_expire
-- Removes rechecks past their end by the clock ($1, or the database's when null), at most $2.
delete from sume.give_up_rechecks
where job_id in (select job_id
                 from sume.give_up_rechecks
                 where until_at < coalesce($1, now())
                 limit $2);
