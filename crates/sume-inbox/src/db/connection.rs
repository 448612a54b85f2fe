//! A connection of the pool, or a transaction on one, together with the way its statements
//! reach the server ([`Protocol`]).
//!
//! Directly connected to PostgreSQL, a statement is prepared once per connection under a name
//! (`s0`, `s1`, ...) and run again by that name: the server parses and plans it once. Behind a
//! pooler in transaction mode (PgBouncer's `pool_mode = transaction`, `DB_POOLER=transaction`)
//! a client's next transaction may run on another server connection, where that name means
//! nothing or another client's statement, so there every statement is sent unnamed (Parse,
//! Bind, Execute and Sync in one round trip): parsed and planned at each run, it never outlives
//! its round trip. An unnamed statement needs its parameters' types, which are learnt once per
//! statement by preparing it inside a transaction (the pooler keeps one server connection for a
//! transaction) and closing it before the commit.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_postgres::types::Type;

use super::DbError;

/// How statements reach the server.
#[derive(Clone, Default)]
pub enum Protocol {
    /// Named statements, prepared once per connection (a direct connection).
    #[default]
    Prepared,
    /// Unnamed statements only (a transaction-mode pooler); the types learnt so far.
    Unnamed(Arc<ParamTypes>),
}

impl Protocol {
    /// Unnamed statements, with nothing learnt yet.
    pub fn unnamed() -> Protocol {
        Protocol::Unnamed(Arc::new(ParamTypes::default()))
    }
}

impl std::fmt::Debug for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Protocol::Prepared => "Prepared",
            Protocol::Unnamed(_) => "Unnamed",
        })
    }
}

/// The parameter types of each statement run unnamed, by its SQL text (two crates may name
/// different statements alike).
#[derive(Default)]
pub struct ParamTypes(Mutex<HashMap<&'static str, Arc<[Type]>>>);

impl ParamTypes {
    pub(super) fn get(&self, sql: &'static str) -> Option<Arc<[Type]>> {
        self.0.lock().expect("param types").get(sql).cloned()
    }

    pub(super) fn put(&self, sql: &'static str, types: Arc<[Type]>) {
        self.0.lock().expect("param types").insert(sql, types);
    }
}

/// What a statement runs on: a connection of the pool or a transaction, with its protocol.
pub trait Session: Sync {
    /// The pool's view of it, which caches prepared statements per connection.
    type Pooled: deadpool_postgres::GenericClient;
    /// tokio-postgres' view of it, which sends unnamed statements.
    type Raw: tokio_postgres::GenericClient + Sync;
    /// For named statements.
    fn pooled(&self) -> &Self::Pooled;
    /// For unnamed statements.
    fn raw(&self) -> &Self::Raw;
    /// How statements are sent.
    fn protocol(&self) -> &Protocol;
    /// Whether a transaction is open (learning a statement's types then needs no transaction
    /// of its own).
    fn in_transaction(&self) -> bool;
    /// Told when a transaction opened by a plain `begin` (learning types) starts and ends, so
    /// a connection dropped in between (a cancelled future) is closed, not pooled again.
    fn raw_transaction(&self, _open: bool) {}
    /// Told of every error a statement met on it: one that shows the session itself is wrong
    /// for what it is used for ([`spoils_session`]) closes the connection when it is dropped,
    /// instead of pooling it again.
    fn failed(&self, _error: &tokio_postgres::Error) {}
}

/// Whether an error shows the session's own state is wrong, so that the connection must not
/// serve again: a read-only transaction (SQLSTATE 25006: `default_transaction_read_only` set
/// on the role or the database, a hot standby) or a statement cancelled (57014: a
/// `statement_timeout` of theirs). Both are read from the role's and the database's settings
/// when a connection opens, and never again: a connection kept would fail the same way until
/// killed, long after the setting was reset. A new one reads them afresh.
pub fn spoils_session(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        *c == SqlState::READ_ONLY_SQL_TRANSACTION || *c == SqlState::QUERY_CANCELED
    })
}

impl DbError {
    /// The session may not write (SQLSTATE 25006: a hot standby, or
    /// `default_transaction_read_only` on the role or the database).
    pub fn is_read_only(&self) -> bool {
        use tokio_postgres::error::SqlState;
        match self {
            DbError::Query { source, .. } | DbError::Transaction { source, .. } => {
                source.code() == Some(&SqlState::READ_ONLY_SQL_TRANSACTION)
            }
            _ => false,
        }
    }
}

/// A connection taken from the pool directly (not through [`super::Store::conn`]): prepared
/// statements, for code that knows it talks to PostgreSQL itself (the benchmark's tools).
impl Session for deadpool_postgres::Object {
    type Pooled = deadpool_postgres::Object;
    type Raw = tokio_postgres::Client;
    fn pooled(&self) -> &Self::Pooled {
        self
    }
    fn raw(&self) -> &Self::Raw {
        self
    }
    fn protocol(&self) -> &Protocol {
        &PREPARED
    }
    fn in_transaction(&self) -> bool {
        false
    }
}

static PREPARED: Protocol = Protocol::Prepared;

/// A connection taken from the pool; back to the pool when dropped, unless a transaction
/// opened by a plain `begin` is still open on it or a statement failed in a way that shows
/// its session is wrong ([`spoils_session`]): then it is closed.
pub struct Conn {
    client: Option<deadpool_postgres::Object>,
    protocol: Protocol,
    raw_open: AtomicBool,
    spoiled: AtomicBool,
}

impl Conn {
    pub(super) fn new(client: deadpool_postgres::Object, protocol: Protocol) -> Conn {
        Conn {
            client: Some(client),
            protocol,
            raw_open: AtomicBool::new(false),
            spoiled: AtomicBool::new(false),
        }
    }

    /// Closes the connection when it is dropped instead of pooling it again, so that the next
    /// one reads the role's and the database's settings afresh (a readiness check that found
    /// its session read-only).
    pub fn discard(&self) {
        self.spoiled.store(true, Ordering::Release);
    }

    fn client(&self) -> &deadpool_postgres::Object {
        self.client
            .as_ref()
            .expect("a Conn holds its connection until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if self.raw_open.load(Ordering::Acquire) || self.spoiled.load(Ordering::Acquire) {
            if let Some(client) = self.client.take() {
                drop(deadpool_postgres::Object::take(client));
            }
        }
    }
}

impl Session for Conn {
    type Pooled = deadpool_postgres::Object;
    type Raw = tokio_postgres::Client;
    fn pooled(&self) -> &Self::Pooled {
        self.client()
    }
    fn raw(&self) -> &Self::Raw {
        self.client()
    }
    fn protocol(&self) -> &Protocol {
        &self.protocol
    }
    fn in_transaction(&self) -> bool {
        false
    }
    fn raw_transaction(&self, open: bool) {
        self.raw_open.store(open, Ordering::Release);
    }
    fn failed(&self, error: &tokio_postgres::Error) {
        note_failure(&self.spoiled, error);
    }
}

/// A transaction on a connection of the pool: `db::begin` opens it, `db::commit`
/// commits it, dropping it rolls it back.
pub struct Tx<'a> {
    tx: deadpool_postgres::Transaction<'a>,
    protocol: Protocol,
    /// Its connection's [`Conn::discard`] mark.
    spoiled: &'a AtomicBool,
}

impl<'a> Session for Tx<'a> {
    type Pooled = deadpool_postgres::Transaction<'a>;
    type Raw = tokio_postgres::Transaction<'a>;
    fn pooled(&self) -> &Self::Pooled {
        &self.tx
    }
    fn raw(&self) -> &Self::Raw {
        &self.tx
    }
    fn protocol(&self) -> &Protocol {
        &self.protocol
    }
    fn in_transaction(&self) -> bool {
        true
    }
    fn failed(&self, error: &tokio_postgres::Error) {
        note_failure(self.spoiled, error);
    }
}

/// Marks the connection to be closed when `error` spoils its session.
fn note_failure(spoiled: &AtomicBool, error: &tokio_postgres::Error) {
    if spoils_session(error) {
        spoiled.store(true, Ordering::Release);
    }
}

/// Opens a transaction for `what` (the method's name, used in errors).
pub(crate) async fn begin<'a>(conn: &'a mut Conn, what: &'static str) -> Result<Tx<'a>, DbError> {
    let Conn {
        client,
        protocol,
        spoiled,
        ..
    } = conn;
    let tx = client
        .as_mut()
        .expect("a Conn holds its connection until dropped")
        .transaction()
        .await
        .map_err(|source| {
            note_failure(spoiled, &source);
            DbError::Transaction {
                what,
                step: "begin",
                source,
            }
        })?;
    Ok(Tx {
        tx,
        protocol: protocol.clone(),
        spoiled,
    })
}

/// Commits a transaction opened by [`begin`].
pub(crate) async fn commit(tx: Tx<'_>, what: &'static str) -> Result<(), DbError> {
    let spoiled = tx.spoiled;
    tx.tx.commit().await.map_err(|source| {
        note_failure(spoiled, &source);
        DbError::Transaction {
            what,
            step: "commit",
            source,
        }
    })
}
