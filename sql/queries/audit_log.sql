-- Statements on sume.audit_log (0008_audit.sql): what operators did.

-- name: audit_log_insert
insert into sume.audit_log (actor, action, detail, request_id)
values ($1, $2, $3, $4)
returning id, at;

-- name: audit_log_page
-- Newest first, before id $1 (null: from the newest), at most $2.
select id, at, actor, action, detail, request_id
from sume.audit_log
where $1::bigint is null or id < $1
order by id desc
limit $2;

-- name: audit_log_writable
-- Whether this session's role may write the audit log: asked before an operator's write, so
-- that no write is done that cannot be recorded.
select has_table_privilege('sume.audit_log', 'INSERT') as writable;
