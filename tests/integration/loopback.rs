//! Without `api.token`, `g2 serve` answers only requests addressed to a
//! loopback name with its port, and takes changes only from its own pages
//! (SECURITY.md, "DNS rebinding"): every route of the API (as its OpenAPI
//! contract lists them), every page of the viewer, `/health` and unknown
//! routes refuse a foreign `Host` with the API's error shape, and a real
//! Chromium that resolves a foreign name to 127.0.0.1 gets the refusal too.

use serde_json::Value;

use crate::support::*;

/// Every (method, path) of the API's contract, with its parameters filled.
fn contract_routes() -> Vec<(String, String)> {
    let spec = std::fs::read_to_string(project_root().join("host/openapi.yaml")).unwrap();
    let mut out = Vec::new();
    let mut path: Option<String> = None;
    for line in spec.lines() {
        if let Some(p) = line.strip_prefix("  /").and_then(|l| l.strip_suffix(':')) {
            path = Some(format!("/{p}"));
        } else if !line.starts_with("  ") {
            path = None;
        } else if let Some(p) = &path {
            for m in ["get", "post", "delete", "put", "patch"] {
                if line == format!("    {m}:") {
                    let filled = p
                        .replace("{folder}", "main")
                        .replace("{id}", "1")
                        .replace("{action}", "pause");
                    out.push((m.to_uppercase(), filled));
                }
            }
        }
    }
    assert!(out.len() >= 30, "the contract's routes: {out:?}");
    out
}

/// The viewer's pages and assets (viewer/mod.rs), `/health` and a route
/// nobody serves.
const OTHER_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/groups/main"),
    ("GET", "/groups/main/archives"),
    ("GET", "/groups/main/sessions"),
    ("GET", "/groups/main/memory"),
    ("GET", "/search?q=x"),
    ("GET", "/tasks"),
    ("GET", "/tasks/1"),
    ("GET", "/usage"),
    ("GET", "/mcp-tokens"),
    ("GET", "/archives/1"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/assets/app.js"),
    ("GET", "/assets/app.css"),
    ("GET", "/health"),
    ("GET", "/no/such/route"),
];

async fn send(
    c: &reqwest::Client,
    method: &str,
    url: &str,
    host: &str,
    origin: Option<&str>,
) -> (u16, Value) {
    let mut r = c
        .request(method.parse().unwrap(), url)
        .header("host", host)
        .header("content-type", "application/json")
        .body(r#"{"sender":"mallory","text":"rebound"}"#);
    if let Some(o) = origin {
        r = r.header("origin", o);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_is_refused_on_every_route() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let port = s.url.rsplit(':').next().unwrap().to_string();
    let c = http_client();
    let mut routes = contract_routes();
    routes.extend(
        OTHER_ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string())),
    );
    for (method, path) in &routes {
        for host in [
            format!("attacker.example:{port}"),
            format!("localhost.attacker.example:{port}"),
            format!("127.0.0.1.nip.io:{port}"),
            "127.0.0.1:1".to_string(),
        ] {
            let (status, body) = send(&c, method, &format!("{}{path}", s.url), &host, None).await;
            assert_eq!(status, 403, "{method} {path} with Host {host}: {body}");
            assert_eq!(
                body["error"]["kind"], "forbidden",
                "{method} {path}: {body}"
            );
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("loopback name"),
                "{body}"
            );
        }
    }
    // Its own names are answered.
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let (status, _) = send(&c, "GET", &format!("{}/health", s.url), &host, None).await;
        assert_eq!(status, 200, "{host}");
    }
    // A change from another origin is refused, from its own or none taken.
    let post = |origin: Option<&'static str>| {
        let (c, url, host) = (
            c.clone(),
            format!("{}/api/groups/main/messages", s.url),
            format!("127.0.0.1:{port}"),
        );
        async move { send(&c, "POST", &url, &host, origin).await }
    };
    let (status, body) = post(Some("http://attacker.example")).await;
    assert_eq!(
        (status, &body["error"]["kind"]),
        (403, &Value::from("forbidden")),
        "{body}"
    );
    let (status, body) = post(Some("null")).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(post(None).await.0, 202);
    let own: &'static str = Box::leak(format!("http://127.0.0.1:{port}").into_boxed_str());
    assert_eq!(post(Some(own)).await.0, 202);
    // Nothing the refused requests carried was stored.
    let stored = home
        .store()
        .read_blocking(|c| {
            c.query_row(
                "SELECT count(*) FROM messages WHERE sender = 'mallory'",
                (),
                |r| r.get::<i64>(0),
            )
        })
        .unwrap();
    assert_eq!(stored, 2, "only the two accepted posts");

    // A browser that resolves a foreign name to this host (DNS rebinding)
    // gets the refusal, not a page.
    if crate::viewer::browser_present() {
        let b = crate::browser::Browser::start_with(&[
            "--host-resolver-rules=MAP attacker.example 127.0.0.1".to_string(),
        ])
        .await;
        b.client
            .goto(&format!("http://attacker.example:{port}/groups/main"))
            .await
            .unwrap();
        let text = b.eval("document.body.innerText").await;
        assert!(text.as_str().unwrap().contains("\"forbidden\""), "{text}");
        b.client
            .goto(&format!("{}/groups/main", s.url))
            .await
            .unwrap();
        assert_eq!(b.client.title().await.unwrap(), "Main · g2");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_the_token_is_the_check() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let token = "tok-loopback-0123456789";
    let s = serve(&home, &[("G2_API__TOKEN", token)]);
    // Behind a reverse proxy the name is the proxy's: the token decides.
    let r = http_client()
        .get(format!("{}/api/groups", s.url))
        .header("host", "g2.example.org")
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http_client()
        .get(format!("{}/api/groups", s.url))
        .header("host", "g2.example.org")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}
