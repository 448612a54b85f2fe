-- Statements on sume.rate_buckets: the fleet-wide token bucket per API key.

-- name: rate_buckets_ensure
insert into sume.rate_buckets (key_name, tokens)
values ($1, $2::float8)
on conflict (key_name) do nothing;

-- name: rate_buckets_take
-- Refills key $1 at $2 tokens a second up to $3, then takes one token if there is one and the
-- key is not paused. Answers whether it took one, the tokens there were, and the seconds the
-- key stays paused.
with cur as (
    select key_name,
           least($3::float8,
                 tokens + $2::float8 * extract(epoch from now() - refilled_at)::float8) as available,
           paused_until
    from sume.rate_buckets
    where key_name = $1
    for update
)
update sume.rate_buckets b
set tokens      = case when cur.paused_until <= now() and cur.available >= 1
                       then cur.available - 1 else cur.available end,
    refilled_at = now()
from cur
where b.key_name = cur.key_name
returning cur.paused_until <= now() and cur.available >= 1 as taken,
          cur.available,
          greatest(extract(epoch from cur.paused_until - now())::float8, 0) as paused_for;

-- name: rate_buckets_pause
-- Nobody uses key $1 for $2 seconds (a Retry-After, or RateLimit-Remaining 0 until the reset).
update sume.rate_buckets
set paused_until = greatest(paused_until, now() + make_interval(secs => $2::float8))
where key_name = $1;
