-- Statements on sume.schema_migrations (the migration runner in db/migrate.rs writes it).

-- name: schema_migrations_version
select coalesce(max(version), 0) from sume.schema_migrations;


-- name: schema_migrations_applied
-- Every applied version: a binary is current when each of its own is among them (numbers may
-- leave gaps, so the highest alone does not say it).
select version from sume.schema_migrations order by version;
