-- The benchmark's statements on sume.disagreements.

-- name: disagreements_count
select count(*) from sume.disagreements;
