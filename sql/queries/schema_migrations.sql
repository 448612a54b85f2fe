-- Statements on sume.schema_migrations (the migration runner in db/migrate.rs writes it).

-- name: schema_migrations_version
select coalesce(max(version), 0) from sume.schema_migrations;

