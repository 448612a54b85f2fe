-- Statements on sume.rate_buckets: the fleet-wide token bucket per API key.

-- name: rate_buckets_ensure
insert into sume.rate_buckets (key_name, tokens)
values ($1, $2::float8)
on conflict (key_name) do nothing;

-- name: rate_buckets_take
-- Refills key $1 at $2 tokens a second up to $3, then takes one token if there is one, the key
-- is not paused and fewer than $4 reads were taken this UTC day. Answers whether it took one,
-- the tokens there were, the seconds the key stays paused (until the next UTC day when the
-- day's allowance is spent), the reads left today and that UTC day. Records $4 as the day's
-- allowance.
with cur as (
    select key_name,
           least($3::float8,
                 tokens + $2::float8 * extract(epoch from now() - refilled_at)::float8) as available,
           paused_until,
           (now() at time zone 'UTC')::date as today,
           case when day = (now() at time zone 'UTC')::date then day_used else 0 end as used
    from sume.rate_buckets
    where key_name = $1
    for update
), decided as (
    select cur.*,
           cur.paused_until <= now() and cur.available >= 1 and cur.used < $4::int as taken
    from cur
)
update sume.rate_buckets b
set tokens      = case when d.taken then d.available - 1 else d.available end,
    refilled_at = now(),
    day         = d.today,
    day_used    = d.used + d.taken::int,
    day_limit   = $4::int
from decided d
where b.key_name = d.key_name
returning d.taken,
          d.available,
          case when d.used >= $4::int
               then extract(epoch from ((d.today + 1)::timestamp at time zone 'UTC') - now())::float8
               else greatest(extract(epoch from d.paused_until - now())::float8, 0) end
            as paused_for,
          greatest($4::int - d.used - d.taken::int, 0)::int8 as left_today,
          d.today;

-- name: rate_buckets_pause
-- Nobody uses key $1 for $2 seconds (a Retry-After, or RateLimit-Remaining 0 until the reset).
update sume.rate_buckets
set paused_until = greatest(paused_until, now() + make_interval(secs => $2::float8))
where key_name = $1;

-- name: rate_buckets_today
-- Each key's reads this UTC day: taken, the day's allowance as last enforced (null until a
-- read was taken by a version that records it), and the share of the UTC day gone by. Only
-- the keys a live instance holds (heard from in the last five minutes and not stopped, as
-- stats_summary counts them): a key no running instance has any more (its instances stopped,
-- or it was taken out of SUME_API_KEYS) keeps its row, but is not listed. A live instance
-- whose heartbeat does not say its keys (an older binary) may hold any: every key is listed.
with live as (
    select api_keys from sume.instances
    where last_seen > now() - interval '5 minutes'
      and exists (select 1 from jsonb_each_text(tasks) t where t.value <> 'finished')
)
select key_name,
       (case when day = (now() at time zone 'UTC')::date then day_used else 0 end)::int8 as used,
       day_limit,
       extract(epoch from (now() at time zone 'UTC')
                          - (now() at time zone 'UTC')::date::timestamp)::float8 / 86400
         as day_gone
from sume.rate_buckets b
where exists (select 1 from live where live.api_keys is null or b.key_name = any(live.api_keys))
order by key_name;
