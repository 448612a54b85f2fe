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

/// The parameter types of each statement run unnamed, by statement name.
#[derive(Default)]
pub struct ParamTypes(Mutex<HashMap<&'static str, Arc<[Type]>>>);

impl ParamTypes {
    pub(super) fn get(&self, name: &'static str) -> Option<Arc<[Type]>> {
        self.0.lock().expect("param types").get(name).cloned()
    }

    pub(super) fn put(&self, name: &'static str, types: Arc<[Type]>) {
        self.0.lock().expect("param types").insert(name, types);
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

/// A connection taken from the pool; back to the pool when dropped.
pub struct Conn {
    client: deadpool_postgres::Object,
    protocol: Protocol,
}

impl Conn {
    pub(super) fn new(client: deadpool_postgres::Object, protocol: Protocol) -> Conn {
        Conn { client, protocol }
    }
}

impl Session for Conn {
    type Pooled = deadpool_postgres::Object;
    type Raw = tokio_postgres::Client;
    fn pooled(&self) -> &Self::Pooled {
        &self.client
    }
    fn raw(&self) -> &Self::Raw {
        &self.client
    }
    fn protocol(&self) -> &Protocol {
        &self.protocol
    }
    fn in_transaction(&self) -> bool {
        false
    }
}

/// A transaction on a connection of the pool: `db::begin` opens it, `db::commit`
/// commits it, dropping it rolls it back.
pub struct Tx<'a> {
    tx: deadpool_postgres::Transaction<'a>,
    protocol: Protocol,
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
}

/// Opens a transaction for `what` (the method's name, used in errors).
pub(crate) async fn begin<'a>(conn: &'a mut Conn, what: &'static str) -> Result<Tx<'a>, DbError> {
    let tx = conn
        .client
        .transaction()
        .await
        .map_err(|source| DbError::Transaction {
            what,
            step: "begin",
            source,
        })?;
    Ok(Tx {
        tx,
        protocol: conn.protocol.clone(),
    })
}

/// Commits a transaction opened by [`begin`].
pub(crate) async fn commit(tx: Tx<'_>, what: &'static str) -> Result<(), DbError> {
    tx.tx.commit().await.map_err(|source| DbError::Transaction {
        what,
        step: "commit",
        source,
    })
}
