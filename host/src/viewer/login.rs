//! Signing in and out (`/login`, `/logout`) and the rule that every page
//! needs a session when `api.token` is set. The sessions, their cookie and
//! CSRF token are the API's access module's (`api::auth`): one module
//! decides for the API and the viewer alike, and a sign-in's token is
//! checked within the client's back-off as a bearer token is
//! (`auth::check_token`).
//!
//! Both routes answer a success with a redirect and every refusal in the
//! API's error shape (a bad form too): the sign-in page's script sends
//! the form and shows the refusal's message (`assets/app.js`).

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::page;
use crate::api::backoff::Client;
use crate::api::{Api, Form, auth, error_response};

/// With `api.token` set, pages need a session (else the sign-in page) and
/// carry its CSRF token.
pub(super) async fn require_login(State(api): State<Api>, req: Request, next: Next) -> Response {
    let Some(token) = &api.token else {
        return next.run(req).await;
    };
    match auth::session(req.headers(), token) {
        Some(s) => auth::for_session(s.csrf(token), next.run(req)).await,
        None => Redirect::to("/login").into_response(),
    }
}

pub(super) async fn login_page(State(api): State<Api>) -> Response {
    page(
        &api,
        "Sign in",
        "<h1>Sign in</h1><p>This host asks for its API token (<code>api.token</code>).</p>\
<form method=\"post\" action=\"/login\" class=\"stack\" data-login>\
<label>Token <input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>\
<button type=\"submit\">Sign in</button><p class=\"error\" role=\"alert\"></p></form>",
    )
}

#[derive(Deserialize)]
pub(super) struct Login {
    token: String,
}

pub(super) async fn login(
    State(api): State<Api>,
    client: Client,
    Form(l): Form<Login>,
) -> Response {
    let Some(token) = &api.token else {
        return Redirect::to("/").into_response();
    };
    let given = l.token.trim();
    if given.is_empty() {
        // Nothing presented: not a guess.
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid",
            "the form's token is empty".into(),
        );
    }
    if let Err(refused) = auth::check_token(&api, client, given, token) {
        return refused.into_response();
    }
    // A new session, with a new CSRF token, at every sign-in.
    let cookie = auth::Session::begin().set_cookie(token);
    let mut r = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize)]
pub(super) struct Logout {
    csrf: String,
}

/// Signs out (the session's CSRF token in the form): the cookie goes.
pub(super) async fn logout(
    State(api): State<Api>,
    headers: axum::http::HeaderMap,
    Form(l): Form<Logout>,
) -> Response {
    let Some(token) = &api.token else {
        return Redirect::to("/").into_response();
    };
    let ours =
        auth::session(&headers, token).is_some_and(|s| auth::same_secret(&l.csrf, &s.csrf(token)));
    if !ours {
        return error_response(
            StatusCode::FORBIDDEN,
            "forbidden",
            "sign out from this host's own page (its session and CSRF token)".into(),
        );
    }
    let mut r = Redirect::to("/login").into_response();
    let gone = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        auth::SESSION_COOKIE
    );
    if let Ok(v) = HeaderValue::from_str(&gone) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
