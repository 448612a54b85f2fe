-- The benchmark's statements on sume.rate_buckets.

-- name: rate_buckets_day_used
-- The chaos suite's Sume black hole: reads taken today under key $1.
select coalesce(max(day_used), 0)::int8 from sume.rate_buckets where key_name = $1;
