-- Statements on sume.disagreements.

-- name: disagreements_insert
insert into sume.disagreements (job_id, kept_state, seen_state, seen_status, source, event_id)
select *
from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]);

-- name: disagreements_page
-- Every disagreement in id order after $1 (null: from the first), at most $2.
select id, job_id, kept_state, seen_state, seen_status, source, event_id, recorded_at
from sume.disagreements
where $1::bigint is null or id > $1
order by id
limit $2;
