//! Integration tests of the development tools: real PostgreSQL (DATABASE_URL, started by
//! `make test`), real HTTP on loopback, the simulator and daemons running in this process.

mod cli;
mod demo;
mod e2e;
mod support;
