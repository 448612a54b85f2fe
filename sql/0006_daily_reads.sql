-- Sume allows each key 10,000 reads a day beside 120 a minute. The fleet's budget keeps the
-- day's count beside the token bucket: the UTC day it counts, and the reads taken in it.
alter table sume.rate_buckets
    add column day      date    not null default (now() at time zone 'UTC')::date,
    add column day_used integer not null default 0;
