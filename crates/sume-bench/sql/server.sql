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
