//! The admin API's OpenAPI 3.1 document, served at `/v1/openapi.json`. It is generated from the
//! handlers' own annotations and the types they answer (utoipa), so it cannot drift from them;
//! the tests check that every route is in it and that answers validate against it.

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{instance_routes, job_routes, operator, replay_routes};

/// Every error: `{"error":{"code","message"},"request_id"}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
    /// The request's id, also in `X-Request-Id` and the daemon's log line.
    pub request_id: String,
}

/// The error itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable: `invalid_query`, `not_found`, `unauthorized`, ...
    pub code: String,
    /// For a person.
    pub message: String,
}

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "sume-inbox admin API",
        description = "Registering and reading jobs, the feed of closes and waiting for a close \
                       (the application's token, ADMIN_APP_TOKEN, or the operator's); everything \
                       else needs the operator's token (ADMIN_TOKEN). Writes need \
                       Content-Type: application/json; every answer carries X-Request-Id."
    ),
    paths(
        job_routes::register, job_routes::list, job_routes::show, serve,
        operator::job_detail, operator::inbox, operator::set_aside, operator::orphans,
        operator::disagreements, operator::dead_letters, operator::stats, operator::audit,
        instance_routes::instances,
        replay_routes::replay_event, replay_routes::replay_dead_letters, replay_routes::drop_dead_letters,
        super::metrics,
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags((name = "application", description = "The application's token suffices"),
         (name = "operator", description = "The operator's token only")),
)]
pub struct ApiDoc;

/// `GET /v1/openapi.json`.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "application",
    responses((status = 200, description = "This document", content_type = "application/json")))]
pub async fn serve() -> Response {
    Json(ApiDoc::openapi()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.route("...", get(..).post(..))` of the router, as (method, path).
    fn routes() -> Vec<(String, String)> {
        let source = include_str!("mod.rs");
        let mut out = Vec::new();
        for chunk in source.split(".route(").skip(1) {
            let Some(chunk) = chunk.trim_start().strip_prefix('"') else {
                continue;
            };
            let (path, rest) = chunk.split_once('"').unwrap();
            let call = &rest[..rest.find("))").unwrap_or(rest.len())];
            for method in ["get", "post", "put", "patch", "delete"] {
                if call.contains(&format!("{method}(")) {
                    out.push((method.to_owned(), path.to_owned()));
                }
            }
        }
        out
    }

    #[test]
    fn every_route_is_in_the_document_and_it_is_openapi_3_1() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let routes = routes();
        assert!(routes.len() >= 16, "{routes:?}");
        for (method, path) in &routes {
            assert!(
                doc["paths"][path][method].is_object(),
                "{method} {path} is routed but not in the OpenAPI document"
            );
        }
        let documented: usize = doc["paths"]
            .as_object()
            .unwrap()
            .values()
            .map(|p| p.as_object().unwrap().len())
            .sum();
        assert_eq!(
            documented,
            routes.len(),
            "the document has routes the router lacks"
        );
        let job = &doc["components"]["schemas"]["JobRow"];
        assert!(job["required"]
            .as_array()
            .unwrap()
            .contains(&"job_id".into()));
    }
}
