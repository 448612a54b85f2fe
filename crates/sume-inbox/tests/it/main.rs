//! Integration tests: real PostgreSQL (DATABASE_URL, started by `make test`), real HTTP on
//! loopback, daemons running in this process through the same `run` as the binary.

mod admin_api;
mod attach;
mod cli;
mod cli_remote;
mod console;
mod console_browser;
mod dedupe;
mod feed;
mod fleet;
mod health;
mod ingest;
mod metrics;
mod migrations;
mod openapi_check;
mod ops;
mod outage;
mod plans;
mod pooler;
mod port;
mod port_bodies;
mod property;
mod reconcile;
mod refusals;
mod retention;
mod roles;
mod settings;
mod shutdown;
mod story;
mod support;
mod sweep;
mod tls;
mod upgrade;
mod vectors;
mod wait;
mod webdriver;
