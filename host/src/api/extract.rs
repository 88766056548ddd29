//! What the API takes in and how it says no: its own extractors
//! ([`Json`], [`Query`], [`Path`], and [`Form`] for the viewer's sign-in
//! and sign-out: axum's, with rejections in the API's shape), [`ApiError`] (a handler's failure, its status by whose fault
//! it is) and [`Rejection`] (a request refused before its handler ran).
//!
//! Invariant: every failure the API answers is
//! `{"error":{"kind","message"}}` ([`error_response`]); handlers take
//! these extractors, never axum's, so no rejection escapes that shape.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{StatusCode, request::Parts};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::Error;

/// An error as the API reports it.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl From<g2_core::validate::ValidationError> for ApiError {
    fn from(e: g2_core::validate::ValidationError) -> Self {
        ApiError(Error::Validation(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, kind) = match &self.0 {
            Error::Validation(_) | Error::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
            Error::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Error::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Error::Conflict(_) | Error::StaleGeneration { .. } => {
                (StatusCode::CONFLICT, "conflict")
            }
            Error::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(error = %self.0, "API request failed");
        }
        let mut r = error_response(status, kind, self.0.to_string());
        if status == StatusCode::TOO_MANY_REQUESTS {
            // A lane frees within a query's time: a second is plenty.
            r.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        r
    }
}

/// The API's error shape, `{"error":{"kind","message"}}`, with `status`.
pub fn error_response(status: StatusCode, kind: &str, message: String) -> Response {
    (
        status,
        axum::Json(json!({ "error": { "kind": kind, "message": message } })),
    )
        .into_response()
}

/// A request refused before its handler ran: what an extractor rejected,
/// a method the route does not take.
pub struct Rejection {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Rejection {
    /// From one of axum's extractor rejections (its status and text).
    fn of(status: StatusCode, text: String, error: &(dyn std::error::Error + 'static)) -> Self {
        if crate::http::is_body_timeout(error) {
            let message = "the request body was not complete in time (api.body_timeout_ms)".into();
            return Rejection {
                status: StatusCode::REQUEST_TIMEOUT,
                kind: "timeout",
                message,
            };
        }
        let (status, kind) = match status {
            StatusCode::PAYLOAD_TOO_LARGE => (status, "too_large"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => (status, "unsupported_media_type"),
            s if s.is_server_error() => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            // Syntax (400) and data (422) errors alike: bad input.
            _ => (StatusCode::BAD_REQUEST, "invalid"),
        };
        Rejection {
            status,
            kind,
            message: text,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(error = %self.message, "API request refused");
        }
        error_response(self.status, self.kind, self.message)
    }
}

/// A JSON body in, or a JSON answer out (axum's `Json`, rejections in the
/// API's shape).
pub struct Json<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = Rejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// The query string (axum's `Query`, rejections in the API's shape).
pub struct Query<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Query(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

/// Path parameters (axum's `Path`, rejections in the API's shape).
pub struct Path<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Rejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(Path(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

/// A form body (axum's `Form`, rejections in the API's shape): the
/// viewer's sign-in and sign-out.
pub struct Form<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Form<T> {
    type Rejection = Rejection;

    async fn from_request(req: Request, state: &S) -> Result<Self, Rejection> {
        match axum::extract::Form::<T>::from_request(req, state).await {
            Ok(axum::extract::Form(v)) => Ok(Form(v)),
            Err(e) => Err(Rejection::of(e.status(), e.body_text(), &e)),
        }
    }
}

/// The answer to a method a route does not take.
pub(super) async fn method_not_allowed(req: Request) -> Rejection {
    Rejection {
        status: StatusCode::METHOD_NOT_ALLOWED,
        kind: "method_not_allowed",
        message: format!("{} does not take {}", req.uri().path(), req.method()),
    }
}

/// What a handler answers: JSON, or the error shape.
pub(super) type ApiResult<T> = Result<Json<T>, ApiError>;

/// The header that says how many words of a search's query were left
/// out (`search::question::cap`); absent when all of it was read.
pub const QUERY_IGNORED: &str = "g2-query-ignored-words";

/// The headers of an answer to a search for `query`: [`QUERY_IGNORED`]
/// when it was cut.
pub(super) fn query_headers(query: &str) -> axum::http::HeaderMap {
    let mut h = axum::http::HeaderMap::new();
    let ignored = crate::search::question::cap(query).ignored;
    if ignored > 0 {
        h.insert(QUERY_IGNORED, ignored.into());
    }
    h
}
