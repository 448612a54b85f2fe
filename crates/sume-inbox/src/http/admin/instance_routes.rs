//! `GET /v1/instances`: the fleet's picture for scripts, what the console's overview shows:
//! every instance with its heartbeat and tasks, and the last hour's counts per minute summed
//! over instances. Read from the rows each instance writes once a minute ([`crate::actors::heartbeat`]).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use super::{unavailable, AdminState, NoQuery};
use crate::db::clock::Clock;
use crate::db::{FleetMinute, InstanceRow};

/// Instances answered at most.
const INSTANCES: i64 = 1000;

/// The answer of `GET /v1/instances`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FleetAnswer {
    /// The instance answering (its name among `instances`).
    pub this_instance: String,
    /// Every instance seen in the last 7 days, the most recently seen first.
    pub instances: Vec<InstanceRow>,
    /// The last 60 minutes, oldest first, every minute present (zeros where nothing was
    /// counted); the current minute fills in as instances flush.
    pub last_hour: Vec<FleetMinute>,
}

/// `GET /v1/instances`: every instance and the fleet's last hour.
#[utoipa::path(get, path = "/v1/instances", tag = "operator", operation_id = "list_instances",
    responses((status = 200, description = "The fleet", body = FleetAnswer)))]
pub(super) async fn instances(State(state): State<AdminState>, _: NoQuery) -> Response {
    let clock = Clock::Database;
    let store = &state.store;
    let read = tokio::try_join!(
        store.instances_list(INSTANCES, &clock),
        store.instance_minutes_last_hour(&clock)
    );
    match read {
        Ok((instances, last_hour)) => Json(FleetAnswer {
            this_instance: state.instance.to_string(),
            instances,
            last_hour,
        })
        .into_response(),
        Err(e) => unavailable("reading the fleet failed", &e),
    }
}
