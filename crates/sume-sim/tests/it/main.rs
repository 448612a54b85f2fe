//! The simulator's integration tests: real HTTP on 127.0.0.1, a real webhook receiver that
//! verifies signatures, no mocks. Every test waits for conditions with a deadline.

mod api;
mod auth;
mod controls;
mod docs;
mod faults;
mod inspect;
mod limits;
mod server;
mod support;
mod webhooks;
