//! `g2 serve`'s HTTP API on a real port: groups, sessions, archives, search,
//! usage, health; loopback unless a token is set; clear errors.

use serde_json::{Value, json};

use crate::steps::quiet_family;
use crate::support::*;

async fn call(c: &reqwest::Client, method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = c.request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// One host's API, called with JSON.
struct Api {
    c: reqwest::Client,
    base: String,
}

impl Api {
    fn of(s: &Serve) -> Api {
        Api {
            c: http_client(),
            base: s.url.clone(),
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        call(&self.c, "GET", &format!("{}{path}", self.base), None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        call(&self.c, "POST", &format!("{}{path}", self.base), Some(body)).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_api() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let sid = "0b9c3f6e-1c1d-4d0e-9a35-6c1b6d7e8f90";
    home.place_transcript("main", sid, &fixture("spotter-short.jsonl"));
    home.ok(&["sessions", "set", "main", sid]);
    let s = serve(&home, &[]);
    let api = Api::of(&s);

    let (st, health) = api.get("/health").await;
    assert_eq!(
        (st, health["status"].as_str()),
        (200, Some("ok")),
        "{health}"
    );
    assert_eq!(health["provider"], "offline");

    // Groups.
    let (st, g) = api
        .post(
            "/api/groups",
            json!({ "folder": "family", "name": "Family" }),
        )
        .await;
    assert_eq!(st, 201, "{g}");
    assert_eq!(g["requires_trigger"], true);
    assert!(home.path().join("groups/family/CLAUDE.md").is_file());
    // Refused: a folder taken, one that is no name.
    for (body, refusal) in [
        (
            json!({ "folder": "family", "name": "Again" }),
            (409, Some("conflict")),
        ),
        (
            json!({ "folder": "../etc", "name": "X" }),
            (400, Some("invalid")),
        ),
    ] {
        let (st, e) = api.post("/api/groups", body).await;
        assert_eq!((st, e["error"]["kind"].as_str()), refusal, "{e}");
    }
    let (st, _) = api
        .post(
            "/api/groups",
            json!({ "folder": "x", "name": "X", "evil": 1 }),
        )
        .await;
    assert!(st == 400 || st == 422, "unknown fields are refused: {st}");
    let (_, list) = api.get("/api/groups").await;
    assert_eq!(list.as_array().unwrap().len(), 2);

    // Sessions: show, clear, history, resume.
    let (_, p) = api.get("/api/groups/main/session").await;
    assert_eq!(p["session_id"], sid);
    let (st, cleared) = api
        .post(
            "/api/groups/main/session/clear",
            json!({ "name": "Spotter work" }),
        )
        .await;
    assert_eq!(st, 200, "{cleared}");
    assert_eq!(cleared["pointer"]["session_id"], Value::Null);
    let archive_id = cleared["archive"]["id"].as_i64().unwrap();
    let (_, hist) = api.get("/api/groups/main/sessions").await;
    assert_eq!(hist[0]["name"], "Spotter work");
    let (st, e) = api
        .post("/api/groups/main/session/clear", json!({ "name": "again" }))
        .await;
    assert_eq!(st, 404, "nothing to clear: {e}");
    let (st, r) = api
        .post(
            "/api/groups/main/session/resume",
            json!({ "history_id": hist[0]["id"] }),
        )
        .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["pointer"]["session_id"], sid);
    let (st, _) = api.get("/api/groups/nobody/session").await;
    assert_eq!(st, 404);

    // Archives and search.
    let (_, arcs) = api.get("/api/groups/main/archives").await;
    assert_eq!(arcs[0]["id"], archive_id);
    let (st, a) = api.get(&format!("/api/archives/{archive_id}")).await;
    assert_eq!(st, 200);
    assert!(
        a["markdown"]
            .as_str()
            .unwrap()
            .starts_with("# Spotter work"),
        "{a}"
    );
    let (_, hits) = api.get("/api/search?q=spotter&group=main").await;
    assert_eq!(hits[0]["archive_id"], archive_id, "{hits}");
    let (st, _) = api.get("/api/search?q=x&group=../up").await;
    assert_eq!(st, 400);
    let (st, usage) = api.get("/api/usage?days=7").await;
    assert_eq!((st, usage), (200, json!([])));

    // Bodies are limited; unknown routes are clear errors.
    let big = json!({ "name": "x".repeat(100_000) });
    let (st, _) = api.post("/api/groups/main/session/clear", big).await;
    assert_eq!(st, 413);
    let (st, e) = api.get("/api/nothing").await;
    assert_eq!((st, e["error"]["kind"].as_str()), (404, Some("not_found")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_guard_the_api_and_other_binds() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    // Not loopback and no token: refused at start.
    let out = home.fails(&["serve", "--listen", "0.0.0.0:0"]);
    assert!(out.contains("api.token"), "{out}");
    let token = "tok-0123456789abcdef";
    let s = serve(&home, &[("G2_API__TOKEN", token)]);
    let c = http_client();
    let (st, _) = call(&c, "GET", &format!("{}/api/groups", s.url), None).await;
    assert_eq!(st, 401);
    let resp = c
        .get(format!("{}/api/groups", s.url))
        .bearer_auth("wrong-token-0123456")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = c
        .get(format!("{}/api/groups", s.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    // Health stays open for probes.
    let (st, _) = call(&c, "GET", &format!("{}/health", s.url), None).await;
    assert_eq!(st, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_stored_first_in_order_and_none_lost() {
    let Some((_home, s)) = quiet_family(&[]) else {
        return;
    };
    let c = http_client();
    let url = format!("{}/api/groups/family/messages", s.url);

    let (st, first) = call(
        &c,
        "POST",
        &url,
        Some(json!({ "sender": "u1", "sender_name": "Ann", "text": "hello <b>&</b>" })),
    )
    .await;
    assert_eq!(st, 202, "{first}");
    // 100 concurrent senders: every message stored once, in one order.
    let mut tasks = Vec::new();
    for i in 0..100 {
        let (c, url) = (c.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            call(
                &c,
                "POST",
                &url,
                Some(json!({ "sender": format!("u{i}"), "text": format!("message {i}") })),
            )
            .await
        }));
    }
    let mut ids = std::collections::HashSet::new();
    for t in tasks {
        let (st, v) = t.await.unwrap();
        assert_eq!(st, 202);
        assert!(ids.insert(v["id"].as_str().unwrap().to_string()));
    }
    let (_, all) = call(&c, "GET", &format!("{url}?limit=1000"), None).await;
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 101);
    assert_eq!(all[0]["text"], "hello <b>&</b>", "stored as received");
    assert_eq!(all[0]["sender_name"], "Ann");
    assert!(
        all.windows(2)
            .all(|w| w[0]["seq"].as_i64() < w[1]["seq"].as_i64())
    );
    let (_, later) = call(&c, "GET", &format!("{url}?after={}", all[99]["seq"]), None).await;
    assert_eq!(later.as_array().unwrap().len(), 1);
    assert_eq!(later[0]["id"], all[100]["id"]);

    // Bad input is refused and stores nothing.
    for bad in [
        json!({ "sender": "u", "text": "  " }),
        json!({ "text": "no sender" }),
        json!({ "sender": "u", "text": "x", "admin": true }),
    ] {
        let (st, _) = call(&c, "POST", &url, Some(bad.clone())).await;
        assert!(st == 400 || st == 422, "{bad}: {st}");
    }
    let (st, _) = call(
        &c,
        "POST",
        &format!("{}/api/groups/nobody/messages", s.url),
        Some(json!({ "sender": "u", "text": "x" })),
    )
    .await;
    assert_eq!(st, 404);
    let (_, all) = call(&c, "GET", &format!("{url}?limit=1000"), None).await;
    assert_eq!(all.as_array().unwrap().len(), 101);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_replays_then_follows_without_gaps_or_repeats() {
    let Some((_home, s)) = quiet_family(&[]) else {
        return;
    };
    let c = http_client();
    let url = format!("{}/api/groups/family/messages", s.url);
    for i in 0..3 {
        call(
            &c,
            "POST",
            &url,
            Some(json!({ "sender": "u", "text": format!("before {i}") })),
        )
        .await;
    }
    let mut stream = Sse::open(&s.url, "family", Some(0)).await;
    let poster = {
        let (c, url) = (c.clone(), url.clone());
        tokio::spawn(async move {
            for i in 0..3 {
                call(
                    &c,
                    "POST",
                    &url,
                    Some(json!({ "sender": "u", "text": format!("after {i}") })),
                )
                .await;
            }
        })
    };
    let mut texts = Vec::new();
    while texts.len() < 6 {
        texts.push(
            stream.until(10, |_| true).await["text"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    poster.await.unwrap();
    assert_eq!(
        texts,
        [
            "before 0", "before 1", "before 2", "after 0", "after 1", "after 2"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_has_the_error_shape() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let c = http_client();
    let u = |p: &str| format!("{}{p}", s.url);
    let json = |body: &str| {
        c.post(u("/api/groups"))
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let get = |p: &str| c.get(u(p));
    // The refusals, by status and error kind.
    let invalid = [
        ("malformed JSON", json("{not json")),
        ("wrong JSON type", json(r#"{"folder": 5, "name": "x"}"#)),
        ("missing field", json(r#"{"folder": "x"}"#)),
        ("bad query string", get("/api/search?q=x&limit=many")),
        ("missing query parameter", get("/api/search")),
        ("bad path parameter", get("/api/archives/seven")),
    ];
    let groups = c.post(u("/api/groups"));
    let media_type = [
        (
            "no content type",
            groups
                .try_clone()
                .unwrap()
                .body(r#"{"folder":"x","name":"X"}"#),
        ),
        (
            "wrong content type",
            groups.header("content-type", "text/plain").body("{}"),
        ),
    ];
    let method = [
        ("wrong method", c.delete(u("/api/search?q=x"))),
        ("wrong method outside /api", c.post(u("/health"))),
    ];
    let big = format!(r#"{{"folder":"x","name":"{}"}}"#, "x".repeat(100_000));
    let others = [
        ("oversized body", json(&big), (413, "too_large")),
        ("unknown route", get("/api/nothing"), (404, "not_found")),
    ];
    let refused = |reqs: Vec<(&'static str, reqwest::RequestBuilder)>,
                   kind: (u16, &'static str)| {
        reqs.into_iter().map(move |(what, req)| (what, req, kind))
    };
    let cases = refused(invalid.into(), (400, "invalid"))
        .chain(refused(media_type.into(), (415, "unsupported_media_type")))
        .chain(refused(method.into(), (405, "method_not_allowed")))
        .chain(others);
    for (what, req, (status, kind)) in cases {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{what}");
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string());
        assert_eq!(ct.as_deref(), Some("application/json"), "{what}");
        let v: Value = resp.json().await.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(v["error"]["kind"], kind, "{what}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{what}: {v}"
        );
        assert_eq!(v.as_object().unwrap().len(), 1, "{what}: {v}");
    }
    // Nothing was registered by any of them.
    let (_, list) = call(&c, "GET", &u("/api/groups"), None).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_are_closed_and_never_starve_a_real_request() {
    // Raised before the host starts: it inherits the limit.
    raise_fd_limit();
    let Some((_home, s)) = quiet_family(&[
        ("G2_API__HEADER_TIMEOUT_MS", "1000"),
        ("G2_API__BODY_TIMEOUT_MS", "1000"),
        ("G2_API__IDLE_TIMEOUT_SECS", "1"),
        ("G2_API__MAX_CONNECTIONS", "1000"),
    ]) else {
        return;
    };
    // An event stream outlives every timeout: answers are never timed.
    let mut stream = Sse::open(&s.url, "family", None).await;
    let addr = s.url.strip_prefix("http://").unwrap().to_string();
    let mut stalled = Vec::new();
    for i in 0..500 {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let kind = Stall::nth(i);
        kind.start(&mut conn, &addr, "/api/groups", "/health").await;
        stalled.push((kind, conn));
    }
    // A real request is answered while all of them are open.
    let resp = http_client()
        .get(format!("{}/api/groups", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let closing: Vec<_> = stalled
        .into_iter()
        .map(|(kind, conn)| tokio::spawn(async move { (kind, until_closed(conn, 30).await) }))
        .collect();
    for c in closing {
        let (kind, got) = c.await.unwrap();
        kind.check_closed(&got, r#""kind":"timeout""#, "HTTP/1.1 200");
    }
    // Still serving, and the stream opened before the stalls is still open.
    let resp = http_client()
        .get(format!("{}/health", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    post(&s.url, "family", "u", "after the stalls").await;
    assert_eq!(stream.until(10, |_| true).await["text"], "after the stalls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_message_with_its_idempotency_key_is_stored_once() {
    let Some((_home, s)) = quiet_family(&[]) else {
        return;
    };
    let c = http_client();
    let url = format!("{}/api/groups/family/messages", s.url);
    let send = |key: &'static str, text: &'static str| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            let r = c
                .post(&url)
                .header("Idempotency-Key", key)
                .json(&json!({ "sender": "u1", "text": text }))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (st, first) = send("k-1", "we need milk").await;
    assert_eq!(st, 202, "{first}");
    assert!(first.get("replayed").is_none(), "{first}");
    // A client that lost the answer retries, several times at once.
    let retries: Vec<_> = (0..5)
        .map(|_| tokio::spawn(send("k-1", "we need milk")))
        .collect();
    for r in retries {
        let (st, again) = r.await.unwrap();
        assert_eq!(st, 202, "{again}");
        assert_eq!((&again["id"], &again["seq"]), (&first["id"], &first["seq"]));
        assert_eq!(again["replayed"], true);
    }
    // The key names one message: another text under it is refused.
    let (st, e) = send("k-1", "we need bread").await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (409, Some("conflict")),
        "{e}"
    );
    // Another key is another message; a bad key is a clear 400.
    let (st, _) = send("k-2", "we need milk").await;
    assert_eq!(st, 202);
    let (st, e) = send("k 1", "x").await;
    assert_eq!(st, 400, "{e}");
    let (_, all) = call(&c, "GET", &url, None).await;
    let texts: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from_bot"] == false)
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["we need milk", "we need milk"], "{all}");
}

/// SHA-256 of `token`, hex: what the store keeps of it.
fn token_hash(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tokens_are_listed_and_revoked_and_never_shown() {
    let Some((home, s)) = quiet_family(&[]) else {
        return;
    };
    let c = http_client();
    let u = |p: &str| format!("{}{p}", s.url);
    let (st, none) = call(&c, "GET", &u("/api/mcp/tokens"), None).await;
    assert_eq!((st, none), (200, json!([])));
    let laptop = home.json(&["mcp", "tokens", "create", "main", "--name", "laptop"]);
    let phone = home.json(&[
        "mcp", "tokens", "create", "family", "--write", "--name", "phone",
    ]);
    let secrets: Vec<String> = [&laptop, &phone]
        .iter()
        .flat_map(|t| {
            let token = t["token"].as_str().unwrap().to_string();
            [token_hash(&token), token]
        })
        .collect();
    let (laptop_id, phone_id) = (
        laptop["details"]["id"].as_i64().unwrap(),
        phone["details"]["id"].as_i64().unwrap(),
    );
    // Every answer is checked for a token or its hash.
    let mut answers = Vec::new();

    let (st, all) = call(&c, "GET", &u("/api/mcp/tokens"), None).await;
    assert_eq!(st, 200, "{all}");
    let names: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["laptop", "phone"], "{all}");
    assert_eq!(all[0]["group"], "main");
    assert_eq!(all[1]["scope"], "write");
    assert!(
        all[0]["prefix"].as_str().unwrap().starts_with("g2mcp_"),
        "{all}"
    );
    assert!(all[0].get("hash").is_none(), "{all}");
    assert!(all[0]["revoked_at"].is_null(), "{all}");
    answers.push(all);
    let (st, family) = call(&c, "GET", &u("/api/mcp/tokens?group=family"), None).await;
    assert_eq!(st, 200, "{family}");
    assert_eq!(family.as_array().unwrap().len(), 1, "{family}");
    assert_eq!(family[0]["id"], phone_id);
    answers.push(family);
    let (st, other) = call(&c, "GET", &u("/api/mcp/tokens?group=nobody"), None).await;
    assert_eq!((st, &other), (200, &json!([])));
    let (st, e) = call(&c, "GET", &u("/api/mcp/tokens?group=..%2Fetc"), None).await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (400, Some("invalid")),
        "{e}"
    );

    // Revoked once: the token as it is now; a second time is a conflict.
    let revoke = u(&format!("/api/mcp/tokens/{laptop_id}"));
    let (st, revoked) = call(&c, "DELETE", &revoke, None).await;
    assert_eq!(st, 200, "{revoked}");
    assert_eq!(revoked["id"], laptop_id);
    assert!(revoked["revoked_at"].is_string(), "{revoked}");
    answers.push(revoked);
    let (st, e) = call(&c, "DELETE", &revoke, None).await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (409, Some("conflict")),
        "{e}"
    );
    answers.push(e);
    let (st, e) = call(&c, "DELETE", &u("/api/mcp/tokens/99999"), None).await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (404, Some("not_found")),
        "{e}"
    );
    let (st, e) = call(&c, "DELETE", &u("/api/mcp/tokens/laptop"), None).await;
    assert_eq!(st, 400, "{e}");
    // The store agrees: only the laptop's is revoked, and `/mcp` refuses it.
    let listed = home.json(&["mcp", "tokens", "list"]);
    let states: Vec<(i64, bool)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_i64().unwrap(), t["revoked_at"].is_string()))
        .collect();
    assert_eq!(states, [(laptop_id, true), (phone_id, false)], "{listed}");
    let r = c
        .post(u("/mcp"))
        .bearer_auth(laptop["token"].as_str().unwrap())
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("revoked"));
    let (_, after) = call(&c, "GET", &u("/api/mcp/tokens"), None).await;
    answers.push(after);
    for answer in answers {
        let text = answer.to_string();
        for secret in &secrets {
            assert!(!text.contains(secret.as_str()), "{text}");
        }
    }
}
