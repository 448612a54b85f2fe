//! What these tests need: the helpers shared with sume-inbox's tests (a fresh database, a
//! daemon on port-0 listeners, waiting with a deadline), from [`sume_testkit`].

pub use sume_testkit::*;
