-- The reads a day each key may take, as the instance that took last enforces it
-- (SUME_READ_DAILY), kept beside the day's count so that the console, GET /v1/stats and
-- `sume-inbox stats` show what is left of the day without the daemon's settings.
alter table sume.rate_buckets
    add column day_limit integer;
