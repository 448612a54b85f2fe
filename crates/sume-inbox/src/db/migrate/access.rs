//! What a role refused a migration may do with the schema, read from the catalog (which every
//! role may read), so that the refusal says the way out: the grants a role lacks on a schema
//! another role made, or a role that may migrate it.

use tokio_postgres::Client;

use crate::db::DbError;

/// The schema `sume` as the connected role finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaAccess {
    /// The connected role, quoted for SQL where it must be (`quote_ident`).
    pub role: String,
    /// The schema's owner, quoted the same way.
    pub owner: String,
    /// Whether the role may read `sume.schema_migrations` (usage on the schema, select on the
    /// table): when not, whether the schema is current cannot be told from here.
    pub reads_versions: bool,
}

/// The schema `sume` as the role of `client` finds it; `None` when there is no such schema.
pub async fn schema_access(client: &Client) -> Result<Option<SchemaAccess>, DbError> {
    let row = client
        .query_opt(
            "select quote_ident(current_user) as role,
                    quote_ident(pg_get_userbyid(n.nspowner)) as owner,
                    has_schema_privilege(n.oid, 'usage')
                      and coalesce((select has_table_privilege(c.oid, 'select')
                                      from pg_class c
                                     where c.relnamespace = n.oid
                                       and c.relname = 'schema_migrations'), false)
                      as reads_versions
               from pg_namespace n
              where n.nspname = 'sume'",
            &[],
        )
        .await
        .map_err(|e| DbError::query("migrate_schema_access", e))?;
    Ok(row.map(|r| SchemaAccess {
        role: r.get("role"),
        owner: r.get("owner"),
        reads_versions: r.get("reads_versions"),
    }))
}
