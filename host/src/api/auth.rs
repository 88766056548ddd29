//! Who may use the host's HTTP server: the one access module of the API
//! and the web viewer (the viewer's sign-in pages, `viewer/login.rs`, use
//! it too).
//!
//! **Where it listens** ([`check_bind`]): a loopback address, or any with
//! an `api.token` of 16+ characters.
//!
//! **Without a token** (`loopback_only`, on every route: pages,
//! `/health` and unknown routes included) the host answers loopback names
//! with its own port only, and takes changes only from its own pages
//! (`http::loopback`: DNS rebinding).
//!
//! **With a token** (`require_token`, on every `/api` route) a request
//! carries it as `Authorization: Bearer`, or is the viewer's: signed in,
//! with, for a change, the session's CSRF token. `/health` stays open.
//! A presented token (bearer or the sign-in's) is checked by
//! [`check_token`], within its client's back-off (`api::backoff`): a
//! guesser is answered 429 with `Retry-After` until it may try again.
//!
//! **A session** is what a sign-in with the API token starts: a random id
//! and the time it began, signed with the token (HMAC-SHA256), kept in an
//! HttpOnly, SameSite=Strict cookie for [`LIFETIME`]. The host keeps no
//! state: a changed `api.token` ends every session, and the cookie never
//! holds the token itself.
//!
//! **The CSRF token** of a session is the HMAC of its id: random per
//! sign-in (rotated at every sign-in), useless without its cookie, shown
//! only on the pages of that session (never on `/login`, never before
//! sign-in). The page hands it to its script in
//! `<meta name="g2-csrf">` ([`for_session`] scopes a page's rendering to
//! it, [`page_csrf`] reads it); a state-changing API request made with the
//! cookie must carry it in [`CSRF_HEADER`].

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::Api;
use super::backoff::{Attempt, Client, retry_after_secs};
use super::extract::error_response;
use crate::Error;

/// The cookie holding the viewer's session.
pub const SESSION_COOKIE: &str = "g2_session";
/// The header a state-changing request made with the cookie carries.
pub const CSRF_HEADER: &str = "x-g2-csrf";
/// How long a sign-in lasts.
pub const LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// A signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    id: String,
    /// When it began (seconds since the epoch).
    since: u64,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// HMAC-SHA256 of `parts` (joined by `:`) under the API token, hex.
fn sign(token: &str, parts: &[&str]) -> String {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(token.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(parts.join(":").as_bytes());
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Session {
    /// A new session (a sign-in): a random id, begun now.
    pub fn begin() -> Session {
        let id = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        Session { id, since: now() }
    }

    /// The cookie's value: id, start and their signature.
    pub fn cookie_value(&self, token: &str) -> String {
        let since = self.since.to_string();
        let mac = sign(token, &["g2-session", &self.id, &since]);
        format!("{}.{since}.{mac}", self.id)
    }

    /// The `Set-Cookie` header that keeps it in the browser.
    pub fn set_cookie(&self, token: &str) -> String {
        format!(
            "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            self.cookie_value(token),
            LIFETIME.as_secs()
        )
    }

    /// The session a cookie value names, when its signature holds under
    /// `token` and it has not expired.
    pub fn from_cookie(value: &str, token: &str) -> Option<Session> {
        let mut parts = value.split('.');
        let (id, since, mac) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || id.len() != 64 {
            return None;
        }
        let started: u64 = since.parse().ok()?;
        let expected = sign(token, &["g2-session", id, since]);
        let fresh = now().saturating_sub(started) < LIFETIME.as_secs();
        (same_secret(mac, &expected) && fresh).then(|| Session {
            id: id.to_string(),
            since: started,
        })
    }

    /// The session's CSRF token.
    pub fn csrf(&self, token: &str) -> String {
        sign(token, &["g2-csrf", &self.id])
    }
}

/// The browser's session in a request's cookies, if it holds one signed
/// with `token`.
pub fn session(headers: &HeaderMap, token: &str) -> Option<Session> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().strip_prefix(SESSION_COOKIE)?.strip_prefix('='))
        .find_map(|v| Session::from_cookie(v, token))
}

/// Whether a request made with a session's cookie may go on: reading
/// always, a change only with the session's CSRF token.
pub fn allows(headers: &HeaderMap, method: &axum::http::Method, s: &Session, token: &str) -> bool {
    let safe = matches!(method.as_str(), "GET" | "HEAD");
    let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
    safe || csrf.is_some_and(|c| same_secret(c, &s.csrf(token)))
}

pub use crate::http::same_secret;

/// Checks that an address may be served: loopback, or any with a token.
pub fn check_bind(addr: &SocketAddr, token: Option<&str>) -> crate::Result<()> {
    if addr.ip().is_loopback() || token.is_some_and(|t| t.len() >= 16) {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "api.listen {addr} is not a loopback address: set api.token (16+ characters) to serve it"
        )))
    }
}

/// Without a token, every route (pages, `/health` and unknown routes
/// included) answers only loopback names, and changes only from the
/// host's own pages: see `http::loopback` (DNS rebinding).
pub(super) async fn loopback_only(State(api): State<Api>, req: Request, next: Next) -> Response {
    let checks = crate::http::Loopback { port: api.port };
    if api.token.is_none()
        && let Some(why) = checks.refusal(req.method(), req.uri(), req.headers())
    {
        tracing::warn!(method = %req.method(), path = %req.uri().path(), "refused: {why}");
        return error_response(StatusCode::FORBIDDEN, "forbidden", why);
    }
    next.run(req).await
}

/// Checks a token a client presented (as a bearer token or at sign-in)
/// within the client's back-off (`api::backoff`): `Ok` when it is this
/// host's, else why not.
pub fn check_token(api: &Api, client: Client, given: &str, token: &str) -> Result<(), Refused> {
    match api.backoff.attempt(client.0, || same_secret(given, token)) {
        Attempt::Right => Ok(()),
        Attempt::Wrong => {
            tracing::warn!(client = %client.0, "refused a wrong API token");
            Err(Refused::Wrong)
        }
        Attempt::Wait(wait) => Err(Refused::Wait(wait)),
    }
}

/// A presented token refused: answered in the API's error shape, 401 for
/// a wrong one, 429 with `Retry-After` (whole seconds) while the client
/// must wait, whatever the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Wrong,
    Wait(Duration),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Wrong => error_response(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "that is not this host's API token".into(),
            ),
            Refused::Wait(wait) => {
                let secs = retry_after_secs(wait);
                let mut r = error_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_attempts",
                    format!("too many wrong tokens from this address: try again in {secs} s"),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
                r
            }
        }
    }
}

/// With a token, an `/api` request needs it, or the viewer's session
/// (and, for a change, its CSRF token). Only a presented bearer token
/// counts towards the client's back-off: a request without one, or with
/// the session's cookie (a signature nobody can guess), never does.
pub(super) async fn require_token(State(api): State<Api>, req: Request, next: Next) -> Response {
    if let Some(token) = &api.token {
        let bearer = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .filter(|t| !t.is_empty());
        let ok = if let Some(given) = bearer {
            if let Err(refused) = check_token(&api, Client::of(req.extensions()), given, token) {
                return refused.into_response();
            }
            true
        } else if let Some(s) = session(req.headers(), token) {
            // The viewer's session: a request that changes something must
            // also carry the session's CSRF token, which another site's
            // page cannot read.
            allows(req.headers(), req.method(), &s, token)
        } else {
            false
        };
        if !ok {
            return error_response(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a bearer token (or the viewer's session cookie and CSRF token) is required".into(),
            );
        }
    }
    next.run(req).await
}

tokio::task_local! {
    /// The CSRF token of the session a page is rendered for.
    static PAGE_CSRF: String;
}

/// Renders a page (runs `f`) for a session: its pages carry its CSRF token.
pub async fn for_session<F: Future>(csrf: String, f: F) -> F::Output {
    PAGE_CSRF.scope(csrf, f).await
}

/// The CSRF token of the page being rendered; empty outside a session
/// (the sign-in page, a host without a token).
pub fn page_csrf() -> String {
    PAGE_CSRF.try_with(Clone::clone).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, Method};

    #[test]
    fn sessions_are_signed_random_and_carry_their_own_csrf() {
        let token = "tok-0123456789abcdef";
        let (a, b) = (Session::begin(), Session::begin());
        assert_ne!(a, b);
        assert_ne!(a.csrf(token), b.csrf(token), "rotated at every sign-in");
        let value = a.cookie_value(token);
        assert!(!value.contains(token), "the cookie never holds the token");
        assert_eq!(Session::from_cookie(&value, token), Some(a.clone()));
        // Another token, a changed byte, an old or odd cookie: no session.
        assert_eq!(Session::from_cookie(&value, "tok-other-0123456789"), None);
        let mut forged = value.clone().into_bytes();
        let last = forged.len() - 1;
        forged[last] = if forged[last] == b'0' { b'1' } else { b'0' };
        assert_eq!(
            Session::from_cookie(&String::from_utf8(forged).unwrap(), token),
            None
        );
        let old = Session {
            since: now() - LIFETIME.as_secs() - 1,
            ..a.clone()
        };
        assert_eq!(Session::from_cookie(&old.cookie_value(token), token), None);
        for odd in ["", "x", "a.b.c", &format!("{value}.more"), token] {
            assert_eq!(Session::from_cookie(odd, token), None, "{odd}");
        }
        // Read among other cookies; a change needs the session's CSRF.
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; {SESSION_COOKIE}={value}; b=2")).unwrap(),
        );
        let s = session(&h, token).unwrap();
        assert!(allows(&h, &Method::GET, &s, token));
        assert!(!allows(&h, &Method::POST, &s, token));
        h.insert(CSRF_HEADER, HeaderValue::from_str(&b.csrf(token)).unwrap());
        assert!(
            !allows(&h, &Method::POST, &s, token),
            "another session's CSRF"
        );
        h.insert(CSRF_HEADER, HeaderValue::from_str(&a.csrf(token)).unwrap());
        assert!(allows(&h, &Method::POST, &s, token));
    }

    #[tokio::test]
    async fn a_page_knows_its_sessions_csrf_and_no_other() {
        assert_eq!(page_csrf(), "");
        let inside = for_session("abc".into(), async { page_csrf() }).await;
        assert_eq!(inside, "abc");
        assert_eq!(page_csrf(), "");
    }
}
