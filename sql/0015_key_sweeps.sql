-- The sweep's walks of Sume's job list, one row per API key name: a walk reads the key's list
-- page by page and settles, at a page's cost, every open job it sees there. The row says when
-- the next walk is due, which instance holds it, and how many pages the last one read (the
-- estimate its next choice between a walk and one read per job starts from).
create table sume.key_sweeps (
    key_name    text primary key,
    next_at     timestamptz not null default now(),
    lease_owner text,
    lease_until timestamptz,
    last_pages  int,
    last_seen   int,
    last_at     timestamptz
);
