-- Statements on the schema itself.

-- name: schema_version
select coalesce(max(version), 0) from sume.schema_migrations;
