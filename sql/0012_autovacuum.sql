-- Vacuum sume.jobs and sume.events sooner and faster than PostgreSQL's defaults. Each job and
-- each event is written three times in its life (insert, close or apply, retention's delete), and
-- every update changes an indexed predicate (no HOT update), so at a few thousand jobs a second
-- the default trigger (a fifth of the table dead) and cost limit let dead tuples outgrow what
-- a pass removes: `make soak` at 2,000 events/s saw sume.jobs' dead tuples grow from 79,000 to
-- 202,000 in seven minutes. Storage parameters only: no rewrite, and the lock taken (share update
-- exclusive) blocks neither reads nor writes.
alter table sume.jobs set (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 2000
);
alter table sume.events set (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_vacuum_cost_limit = 2000
);
