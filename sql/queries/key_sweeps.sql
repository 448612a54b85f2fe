-- Statements on sume.key_sweeps: the list walks of the sweep, per API key name.

-- name: key_sweeps_ensure
insert into sume.key_sweeps (key_name)
select unnest($1::text[])
on conflict (key_name) do nothing;

-- name: key_sweeps_state
-- Each key of $1: whether a walk is due by the clock ($2, or the database's when null) and
-- not held by a live lease, and the pages the last walk read.
select key_name,
       next_at <= coalesce($2, now())
           and (lease_until is null or lease_until < coalesce($2, now())) as due,
       last_pages
from sume.key_sweeps
where key_name = any($1::text[]);

-- name: key_sweeps_claim
-- Takes key $1's walk for instance $2 until the clock ($4) + $3 seconds, if it is due and not
-- held; answers the pages the last walk read (no row: not taken).
update sume.key_sweeps
set lease_owner = $2,
    lease_until = coalesce($4, now()) + make_interval(secs => $3)
where key_name = $1
  and next_at <= coalesce($4, now())
  and (lease_until is null or lease_until < coalesce($4, now()))
returning last_pages;

-- name: key_sweeps_done
-- Key $1's walk by instance $2 read $4 pages and saw $5 of the jobs it looked for; the next is
-- due $3 seconds after the clock ($6).
update sume.key_sweeps
set next_at     = coalesce($6, now()) + make_interval(secs => $3),
    last_pages  = $4,
    last_seen   = $5,
    last_at     = coalesce($6, now()),
    lease_owner = null,
    lease_until = null
where key_name = $1
  and lease_owner = $2;
