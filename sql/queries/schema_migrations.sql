-- Statements on sume.schema_migrations (the migration runner in db/migrate.rs writes it).

-- name: schema_migrations_version
select coalesce(max(version), 0) from sume.schema_migrations;


-- name: schema_migrations_applied
-- Every applied version: a binary is current when each of its own is among them (numbers may
-- leave gaps, so the highest alone does not say it).
select version from sume.schema_migrations order by version;

-- name: schema_migrations_readiness
-- What /readyz asks, in one round trip: every applied version, and whether this session can
-- write. A hot standby (the old primary after a failover, a URL naming the wrong host) and a
-- database with default_transaction_read_only answer true: every write there fails.
select array(select version from sume.schema_migrations order by version) as applied,
       current_setting('transaction_read_only') = 'on' as read_only;
