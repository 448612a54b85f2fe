//! The admin API's OpenAPI 3.1 document, served at `/v1/openapi.json`. It is generated from the
//! handlers' own annotations and the types they answer (utoipa), so it cannot drift from them;
//! the two bearer schemes, which route takes which and the error answers every route shares are
//! added here. The tests check that every route is in it, that the reference validator passes
//! it, that clients generated from it work, and that every answer it documents is given as
//! documented (`tests/it/openapi_*.rs`).

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{self as oa, Components, Content, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, ToSchema};

use super::{feed, forms, instance_routes, job_routes, operator, registration, replay_routes};

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
    /// Stable and machine-readable: `invalid_query`, `not_found`, `no_route`, `unauthorized`, ...
    pub code: String,
    /// For a person.
    pub message: String,
}

/// The two bearer schemes, which one each route takes, and the error answers every route can
/// give before its handler runs (the Host, the token, the content type of a write, another
/// method, a body that stalls) or when the database cannot answer.
struct Schemes;

/// The schemes, as the document names them.
const OPERATOR: &str = "operator";
const APPLICATION: &str = "application";

fn bearer(token: &str, opens: &str) -> SecurityScheme {
    SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(format!(
                "`Authorization: Bearer <{token}>`: {opens}. Without ADMIN_TOKEN set (loopback \
                 only) no token is asked for."
            )))
            .build(),
    )
}

fn error_answer(description: &str) -> RefOr<oa::Response> {
    error_response(description).into()
}

fn error_response(description: &str) -> ResponseBuilder {
    let schema = RefOr::Ref(Ref::from_schema_name("ErrorBody"));
    ResponseBuilder::new()
        .description(description)
        .content("application/json", Content::new(Some(schema)))
}

/// The answers every path gives alike, under `components/responses`, each operation referring
/// to them: a method the path does not take (405), a write whose body stalls (408), and one
/// whose body is too large (413).
const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
const BODY_TIMEOUT: &str = "BodyTimeout";
const TOO_LARGE: &str = "BodyTooLarge";

fn shared_answers(components: &mut Components) {
    let text = || ObjectBuilder::new().schema_type(Type::String);
    let allow = HeaderBuilder::new()
        .schema(text())
        .description(Some("The methods the path takes, e.g. `POST,GET,HEAD`"))
        .build();
    let other_method = error_response(
        "Another method than this path takes (`method_not_allowed`): `Allow` lists those it \
         takes",
    )
    .header("Allow", allow);
    let close = HeaderBuilder::new()
        .schema(text())
        .description(Some("`close`: the connection is closed after this answer"))
        .build();
    let stalled = error_response(
        "The body did not arrive within BODY_TIMEOUT once the headers were in (`body_timeout`)",
    )
    .header("Connection", close.clone());
    let unread = HeaderBuilder::new()
        .schema(text())
        .description(Some(
            "`close` when the answer came from Content-Length, the body left unread: the \
             connection is closed after this answer",
        ))
        .build();
    let too_large = error_response(
        "The body is over 2 MiB (`invalid_body`): refused at once when its Content-Length says \
         so, else once 2 MiB have come",
    )
    .header("Connection", unread);
    components
        .responses
        .insert(METHOD_NOT_ALLOWED.to_owned(), other_method.build().into());
    components
        .responses
        .insert(BODY_TIMEOUT.to_owned(), stalled.build().into());
    components
        .responses
        .insert(TOO_LARGE.to_owned(), too_large.build().into());
}

impl Modify for Schemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        shared_answers(components);
        components.add_security_scheme(
            OPERATOR,
            bearer("ADMIN_TOKEN", "the operator's token, every route"),
        );
        components.add_security_scheme(
            APPLICATION,
            bearer(
                "ADMIN_APP_TOKEN",
                "the application's token, the routes tagged `application`",
            ),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            let ops = [
                (false, &mut item.get),
                (true, &mut item.post),
                (true, &mut item.put),
                (true, &mut item.patch),
                (true, &mut item.delete),
            ];
            for (write, op) in ops {
                if let Some(op) = op.as_mut() {
                    describe(op, path, write);
                }
            }
            if let Some(op) = item.post.as_mut() {
                misrouted_webhook(op);
            }
        }
    }
}

/// The 404 of a POST carrying Sume's signature (`X-Sume-Signature`): a webhook sent to the
/// admin port, refused before the route, whatever the route. A route's own 404 says it too.
fn misrouted_webhook(op: &mut Operation) {
    const SIGNED: &str = "a POST carrying Sume's signature (`X-Sume-Signature`: a webhook sent \
                          to the admin port; `not_found`, naming POST /webhooks/sume on \
                          LISTEN_ADDR)";
    match op.responses.responses.get_mut("404") {
        Some(RefOr::T(answer)) => {
            answer.description = format!("{}; or {SIGNED}", answer.description);
        }
        Some(RefOr::Ref(_)) => {}
        None => {
            op.responses
                .responses
                .insert("404".to_owned(), error_answer(&capitalised(SIGNED)));
        }
    }
}

/// `text` with its first letter in capitals, as a description starts.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase())
        .into_iter()
        .chain(chars)
        .collect()
}

/// One operation's scheme and its common error answers (documented ones are left as they are).
fn describe(op: &mut Operation, path: &str, write: bool) {
    let operator = op.tags.iter().flatten().any(|t| t == OPERATOR);
    let mut schemes = vec![SecurityRequirement::new(OPERATOR, Vec::<String>::new())];
    if !operator {
        schemes.insert(
            0,
            SecurityRequirement::new(APPLICATION, Vec::<String>::new()),
        );
    }
    op.security = Some(schemes);
    op.responses
        .responses
        .entry("401".to_owned())
        .or_insert_with(unauthorized);
    let mut errors = vec![(
        "421",
        "The Host is not the admin address nor one of ADMIN_HOSTS (`unknown_host`)",
    )];
    if operator {
        errors.push((
            "403",
            "The application's token on an operator route (`forbidden`)",
        ));
    }
    if write {
        errors.extend([
            ("400", "The body is not JSON (`invalid_body`)"),
            (
                "415",
                "Not sent with one Content-Type, application/json, or sent compressed \
                 (`unsupported_media_type`)",
            ),
            (
                "422",
                "The body is not of the documented shape, a JSON object (`invalid_body`: an \
                 array, a string, a number or null is refused too), or a field is out of bounds \
                 (`invalid_field`)",
            ),
        ]);
    }
    if path != "/v1/openapi.json" && path != "/metrics" {
        errors.push((
            "503",
            "The database cannot answer (`unavailable`), or its role lacks a grant the route \
             needs (`permission_denied`: the message names the grants to give)",
        ));
    }
    for (status, description) in errors {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| error_answer(description));
    }
    let mut shared = vec![("405", METHOD_NOT_ALLOWED)];
    if op.request_body.is_some() {
        shared.extend([("408", BODY_TIMEOUT), ("413", TOO_LARGE)]);
    }
    for (status, name) in shared {
        let answer = RefOr::Ref(Ref::from_response_name(name));
        op.responses.responses.insert(status.to_owned(), answer);
    }
    refused_before_the_route(op, path);
}

/// The 401 of every route, with the challenge RFC 9110 requires of it.
fn unauthorized() -> RefOr<oa::Response> {
    let challenge = HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(
            "`Bearer realm=\"sume-inbox\"`, with `error=\"invalid_token\"` when a token was \
             sent",
        ))
        .build();
    error_response("No token, a wrong one, or more than one Authorization header (`unauthorized`)")
        .header("WWW-Authenticate", challenge)
        .build()
        .into()
}

/// The 400s every route can give before its own checks: more than one Host header, and (on
/// every route but `/metrics`, whose scrapers add their own) a query parameter it does not
/// take. A route's own 400 says them too.
fn refused_before_the_route(op: &mut Operation, path: &str) {
    let answers = &mut op.responses.responses;
    let own = match answers.get("400") {
        Some(RefOr::T(answer)) => Some(answer.description.clone()),
        Some(RefOr::Ref(_)) => return,
        None => None,
    };
    let mut causes: Vec<&str> = own.iter().map(String::as_str).collect();
    if path != "/metrics" && !own.as_ref().is_some_and(|d| d.contains("`invalid_query`")) {
        causes.push("a query parameter the route does not take (`invalid_query`)");
    }
    causes.push("more than one Host header (`invalid_host`)");
    let description = capitalised(&causes.join("; or "));
    match answers.get_mut("400") {
        Some(RefOr::T(answer)) => answer.description = description,
        _ => {
            answers.insert("400".to_owned(), error_answer(&description));
        }
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
        registration::register, job_routes::list, job_routes::show, feed::closes, serve,
        operator::job_detail, operator::inbox, operator::set_aside, operator::orphans,
        operator::disagreements, operator::dead_letters, operator::stats, operator::audit,
        instance_routes::instances,
        replay_routes::replay_event, replay_routes::replay_dead_letters, replay_routes::drop_dead_letters,
        super::metrics,
    ),
    components(schemas(ErrorBody, ErrorDetail, forms::Text, forms::TimeKey, forms::NumberKey,
        forms::Cursor, forms::Wait, forms::Age)),
    modifiers(&Schemes),
    tags((name = "application", description = "The application's token suffices"),
         (name = "operator", description = "The operator's token only")),
)]
pub struct ApiDoc;

/// `GET /v1/openapi.json`.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "application", operation_id = "get_openapi",
    responses((status = 200, description = "This document", content_type = "application/json")))]
pub(super) async fn serve(_: super::NoQuery) -> Response {
    Json(ApiDoc::openapi()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `.route("...", get(..).post(..))` of the router, as (method, path, whether it is
    /// behind `operator_only`: routed after `let operator`).
    fn routes() -> Vec<(String, String, bool)> {
        let source = include_str!("mod.rs");
        let (app, operator) = source.split_once("let operator = ").unwrap();
        let mut out = Vec::new();
        for (part, operator_only) in [(app, false), (operator, true)] {
            for chunk in part.split(".route(").skip(1) {
                let Some(chunk) = chunk.trim_start().strip_prefix('"') else {
                    continue;
                };
                let (path, rest) = chunk.split_once('"').unwrap();
                let call = &rest[..rest.find("))").unwrap_or(rest.len())];
                for method in ["get", "post", "put", "patch", "delete"] {
                    if call.contains(&format!("{method}(")) {
                        out.push((method.to_owned(), path.to_owned(), operator_only));
                    }
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
        for (method, path, operator_only) in &routes {
            let op = &doc["paths"][path][method];
            assert!(
                op.is_object(),
                "{method} {path} is routed but not in the OpenAPI document"
            );
            // The schemes that open it: the operator's alone behind `operator_only`.
            let expected = if *operator_only {
                serde_json::json!([{"operator": []}])
            } else {
                serde_json::json!([{"application": []}, {"operator": []}])
            };
            assert_eq!(op["security"], expected, "{method} {path}");
            let tag = if *operator_only {
                "operator"
            } else {
                "application"
            };
            assert_eq!(op["tags"], serde_json::json!([tag]), "{method} {path}");
        }
        let schemes = &doc["components"]["securitySchemes"];
        for (name, token) in [
            ("operator", "ADMIN_TOKEN"),
            ("application", "ADMIN_APP_TOKEN"),
        ] {
            assert_eq!(schemes[name]["scheme"], "bearer", "{name}");
            let description = schemes[name]["description"].as_str().unwrap();
            assert!(description.contains(token), "{name}: {description}");
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
