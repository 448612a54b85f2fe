-- The benchmark's statements on the server itself.

-- name: server_synchronous_commit
show synchronous_commit;

-- name: server_fsync
show fsync;

-- name: server_version
show server_version;

-- name: server_data_directory
show data_directory;

-- name: server_checkpoint
checkpoint;

-- name: server_triggers_off
-- Bulk seeding without a notification per inserted row.
set session_replication_role = replica;

-- name: server_triggers_on
set session_replication_role = origin;

-- name: server_drop_database
-- {database} is replaced by a fixed name of the benchmark's (letters and _ only).
drop database if exists {database} with (force);

-- name: server_create_database
create database {database};

-- name: server_terminate_backends
-- The chaos suite: cuts every connection to database $1 but this one.
select count(pg_terminate_backend(pid))
from pg_stat_activity
where datname = $1 and pid <> pg_backend_pid();

-- name: server_backends
-- The fleet benchmark's sample: client backends of the whole server (connections open) and
-- those running a statement, leaving out the benchmark's own (application_name sume-bench)
-- and those opened before $1 (text, a timestamptz: PgBouncer's idle server connections left
-- from an earlier step when the instances connect directly).
select count(*)::int8,
       count(*) filter (where state not in ('idle'))::int8
from pg_stat_activity
where backend_type = 'client backend' and application_name <> 'sume-bench'
  and backend_start >= $1::text::timestamptz;

-- name: server_now
select now()::text;

-- name: server_mark_own_connection
-- Names the benchmark's own connections, so that its samples leave them out.
set application_name = 'sume-bench';

-- name: server_tables
-- The soak's sample of each table of the daemon's schema: live and dead tuples as the
-- statistics count them, and table + indexes + TOAST in bytes.
select relname::text, n_live_tup, n_dead_tup, pg_total_relation_size(relid)
from pg_stat_user_tables
where schemaname = 'sume'
order by relname;

-- name: server_live_rows
-- The soak's exact row counts of the tables that grow with the traffic.
select (select count(*) from sume.events),
       (select count(*) from sume.jobs),
       (select count(*) from sume.job_closes),
       (select count(*) from sume.inbox_checks);

-- name: server_sync_standby_on
-- The chaos suite's standby: every commit waits for a standby (any of them) to have it.
alter system set synchronous_standby_names = '*';

-- name: server_sync_standby_off
alter system reset synchronous_standby_names;

-- name: server_remote_apply
-- Every commit waits for the synchronous standby to have applied it (read-your-writes there).
alter system set synchronous_commit = 'remote_apply';

-- name: server_commit_default
alter system reset synchronous_commit;

-- name: server_primary_conninfo
-- {conninfo} is replaced by a fixed connection string of the suite's ('host=... port=...').
alter system set primary_conninfo = '{conninfo}';

-- name: server_reload
select pg_reload_conf();

-- name: server_replication
-- The primary's standbys: how many stream, how many of them synchronously.
select count(*) filter (where state = 'streaming'),
       count(*) filter (where state = 'streaming' and sync_state = 'sync')
from pg_stat_replication;

-- name: server_in_recovery
select pg_is_in_recovery();

-- name: server_wal_receiver_port
-- On a standby: the port its WAL receiver streams from (0 while it does not stream).
select coalesce((select sender_port from pg_stat_wal_receiver where status = 'streaming'), 0);

-- name: server_plus_seconds
-- $1 (text, a timestamptz) plus $2 seconds, as text.
select ($1::text::timestamptz + make_interval(secs => $2::float8))::text;
