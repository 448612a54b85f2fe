-- The fleet's picture: each instance's heartbeat and its per-minute counters, written by the
-- instance itself once a minute with one statement (`instances_flush`), so any instance can
-- show every instance and the last hour. Refusals (401) and 503s are counted only here: they
-- cost no row at request time. Additive only: binaries older than this migration never read
-- or write these tables.

-- One row per running process. `instance` is the process's lease owner name (host, pid and
-- random bits), so a restart is a new row; rows unseen for days are removed by the instances
-- themselves.
create table sume.instances (
    instance    text primary key,
    hostname    text not null,
    pid         integer not null,
    version     text not null,
    started_at  timestamptz not null,
    -- The database's clock at the last heartbeat: "silent" is judged on one clock.
    last_seen   timestamptz not null,
    -- Each task of the instance and its state: {"attach": "running", ...} (running, finished,
    -- dead); every task finished means the instance stopped gracefully.
    tasks       jsonb not null default '{}',
    -- The last flush applied: a flush retried after an answer that was lost (its commit may
    -- have happened) is recognised by its number and not counted twice.
    flushed_seq bigint not null default 0
);

-- Counts of one minute of one instance (the minute is the instance's clock's, truncated).
-- Keyed by minute first, so the last hour of the whole fleet is one index range scan.
create table sume.instance_minutes (
    minute            timestamptz not null,
    instance          text not null,
    stored            bigint not null default 0,
    duplicates        bigint not null default 0,
    unauthorized      bigint not null default 0,
    unavailable       bigint not null default 0,
    closed_by_webhook bigint not null default 0,
    closed_by_poll    bigint not null default 0,
    given_up          bigint not null default 0,
    primary key (minute, instance)
);

-- Pruning unseen instances reads by last_seen.
create index instances_last_seen on sume.instances (last_seen);
