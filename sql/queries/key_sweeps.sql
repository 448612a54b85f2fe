-- Statements on sume.key_sweeps: the list walks of the sweep, per API key name.

-- name: key_sweeps_ensure
-- A row for each key of $1 that has none: no walk yet, so its pace holds none back from the
-- clock ($2, or the database's when null).
insert into sume.key_sweeps (key_name, next_at)
select unnest($1::text[]), coalesce($2, now())
on conflict (key_name) do nothing;

-- name: key_sweeps_state
-- Each key of $1: from when its pace lets the next walk start (next_at), whether a live lease
-- holds it, and the pages the last walk read up to its last useful one; with the clock ($2, or
-- the database's when null) that both are read against. Whether a walk is due also needs the
-- key's oldest open job's own poll (jobs_open_by_key): walk_choice::next_walk decides.
select key_name,
       next_at,
       coalesce(lease_until >= coalesce($2, now()), false) as held,
       last_pages,
       coalesce($2, now()) as now
from sume.key_sweeps
where key_name = any($1::text[]);

-- name: key_sweeps_claim
-- Takes key $1's walk for instance $2 until the clock ($4) + $3 seconds, if its pace allows
-- one and no live lease holds it; answers the pages the last walk read and the clock (no row:
-- not taken). The guard is what keeps a fleet to one walk at the key's pace: an instance that
-- decided on a state read before another's walk ended finds next_at moved on.
update sume.key_sweeps
set lease_owner = $2,
    lease_until = coalesce($4, now()) + make_interval(secs => $3)
where key_name = $1
  and next_at <= coalesce($4, now())
  and (lease_until is null or lease_until < coalesce($4, now()))
returning last_pages, coalesce($4, now()) as at;

-- name: key_sweeps_done
-- Key $1's walk by instance $2 saw $5 of the jobs it looked for; the next may start $3 seconds
-- after the clock ($6), the pace walk_choice::pace_gap decided. $4, the pages up to the last
-- one that held a job looked for, is the next walk's estimate; null (no page was read) keeps
-- the last one.
update sume.key_sweeps
set next_at     = coalesce($6, now()) + make_interval(secs => $3),
    last_pages  = coalesce($4, last_pages),
    last_seen   = $5,
    last_at     = coalesce($6, now()),
    lease_owner = null,
    lease_until = null
where key_name = $1
  and lease_owner = $2;
