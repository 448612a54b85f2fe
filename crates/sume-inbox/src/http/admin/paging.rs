//! Paging on the admin API's lists: `limit` (1 to 1000, default 100) and `after`, the
//! `next_after` of the previous page (`null` on the last). An `after` is a position in the
//! list's order, not a token: only its form is checked ([`super::forms`]), and a well-formed one
//! answers the rows after it whether or not a page ended there. (A token naming its list would
//! refuse the cursors clients already hold, and those an instance of the previous release gives
//! during a rolling upgrade.) An empty `after` (`after=`, what a client that writes its URL
//! from a template sends before it has a position) is the start, as no `after` is.

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use axum::http::StatusCode;
use serde::Deserialize;

use super::forms::{NumberKey, TimeKey};
use crate::db::PAGE_LIMIT_MAX;
use crate::http::ApiError;

/// Rows a page answers when `limit` is not given.
const DEFAULT_LIMIT: i64 = 100;

/// The form of an `after` in the lists ordered by a time then an id, as messages name it.
pub(super) const TIME_KEY_FORM: &str = "`<RFC 3339 time>|<id>`";
/// The form of an `after` in the lists ordered by a number, as messages name it.
pub(super) const NUMBER_KEY_FORM: &str = "a whole number";

pub(super) fn bad_query(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
}

/// `limit` when given, checked: 1 to [`PAGE_LIMIT_MAX`].
pub(super) fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=PAGE_LIMIT_MAX).contains(&n) => Ok(n),
        Some(n) => Err(bad_query(format!(
            "limit must be 1 to {PAGE_LIMIT_MAX}, not {n}"
        ))),
    }
}

/// `limit` and `after`, the query of the lists ordered by a time then an id.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TimePageQuery {
    /// Rows per page, 1 to 1000 (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_after` of the previous page: a position in this list's order,
    /// `<RFC 3339 time>|<id>`; empty, the start. Only its form is checked (400
    /// `invalid_query` when it is not that): a well-formed one answers the rows after it,
    /// whether or not a page ended there.
    #[param(nullable = false, value_type = Option<TimeKey>)]
    pub after: Option<String>,
}

/// `limit` and `after`, the query of the lists ordered by a number.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct NumberPageQuery {
    /// Rows per page, 1 to 1000 (default 100).
    #[param(nullable = false, minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// `next_after` of the previous page: a position in this list's order, a whole number;
    /// empty, the start. Only its form is checked (400 `invalid_query` when it is not that): a
    /// well-formed one answers the rows after it, whether or not a page ended there.
    #[param(nullable = false, value_type = Option<NumberKey>)]
    pub after: Option<String>,
}

/// A time-keyed list's checked query: the limit, and `after` as a [`crate::db::PageKey`].
pub(super) fn time_page(
    query: Result<Query<TimePageQuery>, QueryRejection>,
) -> Result<(i64, Option<crate::db::PageKey>), ApiError> {
    let Query(q) = query.map_err(|e| bad_query(e.body_text()))?;
    page_of(
        q.limit,
        q.after.as_deref(),
        TIME_KEY_FORM,
        crate::db::PageKey::decode,
    )
}

/// A number-keyed list's checked query: the limit, and `after` as a number.
pub(super) fn number_page(
    query: Result<Query<NumberPageQuery>, QueryRejection>,
) -> Result<(i64, Option<i64>), ApiError> {
    let Query(q) = query.map_err(|e| bad_query(e.body_text()))?;
    page_of(q.limit, q.after.as_deref(), NUMBER_KEY_FORM, |s| {
        s.parse().ok()
    })
}

/// The limit, and `after` as the page reads it: one not of the list's `form` is refused, an
/// empty one is the start.
pub(super) fn page_of<T>(
    limit: Option<i64>,
    raw: Option<&str>,
    form: &str,
    after: impl FnOnce(&str) -> Option<T>,
) -> Result<(i64, Option<T>), ApiError> {
    let limit = page_limit(limit)?;
    let key = match raw.filter(|raw| !raw.is_empty()) {
        None => None,
        Some(raw) => Some(
            after(raw)
                .filter(|_| crate::db::text_can_hold(raw))
                .ok_or_else(|| {
                    bad_query(format!(
                        "after must be a position in this list, {form} as its next_after is, \
                         or empty for the start, not {raw:?}"
                    ))
                })?,
        ),
    };
    Ok((limit, key))
}

/// A full page's last row gives the next key; a short page is the last.
pub(super) fn next<R>(rows: &[R], limit: i64, key: impl Fn(&R) -> String) -> Option<String> {
    (rows.len() as i64 == limit)
        .then(|| rows.last().map(key))
        .flatten()
}
