//! What a server that listens on loopback without a token answers: only
//! requests addressed to a loopback name, and changes only from its own
//! pages.
//!
//! Listening on 127.0.0.1 keeps other machines out, but not the operator's
//! own browser: a page from `attacker.example` can make its name resolve
//! to 127.0.0.1 (DNS rebinding) and then talk to the server as if from the
//! same origin — reading every group's messages, posting into them,
//! spending the model credential. What such a request cannot change is its
//! `Host` header (the attacker's name) and, for a request that changes
//! something, its `Origin`. So without a token:
//! - the `Host` (or an absolute request target's authority) must be
//!   `localhost`, an address in `127.0.0.0/8` or `[::1]`, with the port
//!   the server listens on (none only when that is 80);
//! - a request other than GET, HEAD or OPTIONS that carries an `Origin`
//!   must carry the server's own (`http://` and the request's `Host`); a
//!   request without one (`curl`, `g2 chat`) is no browser's.
//!
//! With a token (the API's `api.token`) the token is the check: a rebound
//! page does not have it, and the viewer's cookie belongs to the real name.

use std::net::{IpAddr, Ipv6Addr};

use axum::http::{HeaderMap, Method, Uri, header};

/// The checks of one server, listening on `port`.
#[derive(Debug, Clone, Copy)]
pub struct Loopback {
    pub port: u16,
}

impl Loopback {
    /// Why a request is refused, in words; None when it may be answered.
    pub fn refusal(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<String> {
        let host = match uri.authority() {
            Some(a) => Some(a.as_str()),
            None => headers.get(header::HOST).and_then(|h| h.to_str().ok()),
        };
        let Some(host) = host.filter(|h| self.is_own(h)) else {
            return Some(format!(
                "this host answers only requests addressed to it by a loopback name \
                 (localhost:{p}, 127.0.0.1:{p} or [::1]:{p}) while it has no api.token; \
                 the request named {:?}",
                host.unwrap_or("no host"),
                p = self.port
            ));
        };
        let changes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
        if changes
            && let Some(origin) = headers.get(header::ORIGIN)
            && origin.to_str().ok() != Some(&format!("http://{host}"))
        {
            return Some(format!(
                "a change must come from this host's own pages (origin http://{host}), not from {:?}",
                String::from_utf8_lossy(origin.as_bytes())
            ));
        }
        None
    }

    /// Whether `authority` (`name[:port]`) is a loopback name with this
    /// server's port.
    fn is_own(&self, authority: &str) -> bool {
        let (name, port) = split(authority);
        let port_ok = match port {
            Some(p) => p.parse::<u16>().ok() == Some(self.port),
            None => self.port == 80,
        };
        port_ok && is_loopback_name(name)
    }
}

/// `name` and the port of `name:port`, `[v6]:port`, `name` or `[v6]`.
fn split(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((v6, tail)) => (v6, tail.strip_prefix(':')),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (authority, None),
    }
}

fn is_loopback_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(IpAddr::V6(v6)) => v6 == Ipv6Addr::LOCALHOST,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn check(method: Method, host: Option<&str>, origin: Option<&str>) -> Option<String> {
        let mut h = HeaderMap::new();
        if let Some(v) = host {
            h.insert(header::HOST, HeaderValue::from_str(v).unwrap());
        }
        if let Some(v) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(v).unwrap());
        }
        Loopback { port: 4170 }.refusal(&method, &Uri::from_static("/api/groups"), &h)
    }

    #[test]
    fn only_loopback_names_with_the_port_are_answered() {
        for ok in [
            "localhost:4170",
            "LocalHost:4170",
            "localhost.:4170",
            "127.0.0.1:4170",
            "127.1.2.3:4170",
            "[::1]:4170",
        ] {
            assert_eq!(check(Method::GET, Some(ok), None), None, "{ok}");
        }
        for bad in [
            "attacker.example:4170",
            "localhost.attacker.example:4170",
            "127.0.0.1.nip.io:4170",
            "localhost:4171",
            "localhost",
            "127.0.0.1",
            "[::2]:4170",
            "[::ffff:127.0.0.1]:4170",
            "0.0.0.0:4170",
            "",
        ] {
            let why = check(Method::GET, Some(bad), None).unwrap_or_default();
            assert!(why.contains("loopback name"), "{bad}: {why}");
        }
        assert!(check(Method::GET, None, None).is_some(), "no Host at all");
        // An absolute target's authority is what counts.
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("localhost:4170"));
        let uri: Uri = "http://attacker.example:4170/api/groups".parse().unwrap();
        assert!(
            Loopback { port: 4170 }
                .refusal(&Method::GET, &uri, &h)
                .is_some()
        );
        // Port 80 may be left out.
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("localhost"));
        let uri = Uri::from_static("/");
        assert_eq!(Loopback { port: 80 }.refusal(&Method::GET, &uri, &h), None);
    }

    #[test]
    fn changes_come_only_from_the_own_origin() {
        let host = Some("127.0.0.1:4170");
        assert_eq!(check(Method::POST, host, None), None, "curl sends none");
        assert_eq!(
            check(Method::POST, host, Some("http://127.0.0.1:4170")),
            None
        );
        assert_eq!(
            check(
                Method::DELETE,
                Some("localhost:4170"),
                Some("http://localhost:4170")
            ),
            None
        );
        for foreign in [
            "http://attacker.example",
            "http://localhost:4170",
            "https://127.0.0.1:4170",
            "http://127.0.0.1:8080",
            "null",
        ] {
            let why = check(Method::POST, host, Some(foreign)).unwrap_or_default();
            assert!(why.contains("own pages"), "{foreign}: {why}");
        }
        // Reading is not a change: the Host check is what guards it.
        assert_eq!(
            check(Method::GET, host, Some("http://attacker.example")),
            None
        );
    }
}
