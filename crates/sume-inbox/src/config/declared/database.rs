//! Where the database is, and how the daemon reaches it (the pool, a transaction pooler, the
//! direct connections for migrations and LISTEN).

use super::declare;
use crate::config::setting::{Form, Setting};

declare! { DATABASE, "Database",
    /// The database every instance shares.
    DATABASE_URL {
        flag: Some("database-url"),
        form: Form::PostgresUrl,
        required: true,
        secret: true,
        about: "PostgreSQL URL; `sslmode` and `sslrootcert` as in libpq (below)",
    }
    /// Connections in this instance's pool.
    DB_POOL_SIZE {
        flag: Some("db-pool-size"),
        default: Some("16"),
        form: Form::Count { min: 2, max: 10_000 },
        about: "connections per instance (plus two for LISTEN: attach's and the waiters')",
    }
    /// What sits between the daemon and PostgreSQL.
    DB_POOLER {
        flag: Some("db-pooler"),
        default: Some("none"),
        form: Form::Choice(&["none", "transaction", "session"]),
        about: "`transaction` when `DATABASE_URL` is a pooler in transaction mode (PgBouncer; `session` and `none` otherwise): unnamed statements only, no LISTEN and no migrations through it (see [Behind PgBouncer](#behind-pgbouncer-transaction-mode))",
    }
    /// A direct connection for the migrations.
    MIGRATE_DATABASE_URL {
        flag: Some("migrate-database-url"),
        form: Form::PostgresUrl,
        secret: true,
        about: "a direct connection for the migrations at start (and for `sume-inbox migrate`); with `DB_POOLER=transaction` and without it, `serve` migrates nothing and refuses a schema older than its own",
    }
    /// A direct connection for LISTEN.
    LISTEN_DATABASE_URL {
        flag: Some("listen-database-url"),
        form: Form::PostgresUrl,
        secret: true,
        about: "a direct connection for attach's LISTEN; with `DB_POOLER=transaction` and without it, no LISTEN (a shorter catch-up scan instead)",
    }
}
