//! The `anthropic` provider against an upstream that replays recorded
//! Anthropic answers: relayed as they come, the key never leaked.

use super::*;

/// An upstream that answers like the Anthropic API from recorded bodies,
/// chosen by the request's model, and remembers what it received.
/// A request upstream received: path and query, headers, JSON body.
pub(crate) type Seen = (String, HashMap<String, String>, Value);

#[derive(Clone, Default)]
pub(crate) struct Upstream {
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    pub(super) release: Arc<Notify>,
    finished: Arc<AtomicBool>,
}

impl Upstream {
    pub(crate) async fn start(&self) -> String {
        let app = Router::new()
            .route("/v1/messages", post(replay))
            .route("/v1/messages/count_tokens", post(replay_count))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    fn record(&self, req: &Request, body: &Bytes) -> Value {
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let pq = req
            .uri()
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.seen.lock().unwrap().push((pq, headers, body.clone()));
        body
    }
}

fn sse_events(text: &str) -> Vec<Bytes> {
    text.split_inclusive("\n\n")
        .map(|e| Bytes::from(e.to_string()))
        .collect()
}

fn body_from(rx: tokio::sync::mpsc::Receiver<Bytes>) -> Body {
    Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }))
}

async fn replay(State(u): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let req = Request::from_parts(parts, Body::empty());
    let body = u.record(&req, &bytes);
    let sse = |text: String| {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            for e in sse_events(&text) {
                if tx.send(e).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        (
            [
                ("content-type", "text/event-stream"),
                ("request-id", "req_replay"),
            ],
            body_from(rx),
        )
            .into_response()
    };
    let json_reply = |status: u16, text: String| {
        (
            StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            text,
        )
            .into_response()
    };
    match body["model"].as_str().unwrap_or("") {
        "replay-stream" => sse(recorded("stream.sse")),
        "replay-stream-error" => sse(recorded("stream_error.sse")),
        "replay-message" => json_reply(200, recorded("message.json")),
        "replay-overloaded" => json_reply(529, recorded("overloaded.json")),
        "replay-invalid" => json_reply(400, recorded("invalid_request.json")),
        "replay-proxy" => {
            // A misbehaving proxy that echoes the credential it got.
            let key = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            (StatusCode::BAD_GATEWAY, [("content-type", "text/html")], format!("<html>bad gateway; your key {key}</html>"))
                .into_response()
        }
        "replay-hold" => {
            // First event now; the rest only once the test says so.
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            let (release, finished) = (u.release.clone(), u.finished.clone());
            tokio::spawn(async move {
                let mut events = sse_events(&recorded("stream.sse")).into_iter();
                let _ = tx.send(events.next().unwrap()).await;
                let _ = tokio::time::timeout(Duration::from_secs(20), release.notified()).await;
                for e in events {
                    let _ = tx.send(e).await;
                }
                finished.store(true, Ordering::SeqCst);
            });
            ([("content-type", "text/event-stream")], body_from(rx)).into_response()
        }
        other => json_reply(
            404,
            json!({ "type": "error", "error": { "type": "not_found_error", "message": format!("model: {other}") } })
                .to_string(),
        ),
    }
}

async fn replay_count(State(u): State<Upstream>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    u.record(&Request::from_parts(parts, Body::empty()), &bytes);
    (
        [("content-type", "application/json")],
        "{\"input_tokens\":42}",
    )
        .into_response()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_provider_relays_answers_and_never_leaks_the_key() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    let key = format!("sk-ant-test-{}", uuid::Uuid::new_v4().simple());
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", &key),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
            ("G2_LOG", "trace"),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages?beta=true", gw.url);
    let mut bodies = Vec::new();

    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].starts_with("text/event-stream"));
    assert_eq!(headers["request-id"], "req_replay");
    assert_eq!(
        body,
        recorded("stream.sse"),
        "the stream must be relayed byte for byte"
    );
    bodies.push(body);

    let (status, _, body) = post_json(&client, &url, request("replay-message", false)).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap(),
        serde_json::from_str::<Value>(&recorded("message.json")).unwrap()
    );
    bodies.push(body);

    for (model, want_status, fixture) in [
        ("replay-overloaded", 529, "overloaded.json"),
        ("replay-invalid", 400, "invalid_request.json"),
    ] {
        let (status, _, body) = post_json(&client, &url, request(model, true)).await;
        assert_eq!(status, want_status, "{model}");
        assert_eq!(body.trim(), recorded(fixture).trim(), "{model}");
        bodies.push(body);
    }

    // A non-Anthropic error body is wrapped in Anthropic's shape and scrubbed.
    let (status, _, body) = post_json(&client, &url, request("replay-proxy", true)).await;
    assert_eq!(status, 502);
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "api_error");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[redacted]"),
        "{body}"
    );
    bodies.push(body);

    let (status, _, body) = post_json(&client, &url, request("replay-stream-error", true)).await;
    assert_eq!(status, 200);
    assert!(body.contains("event: error"));
    bodies.push(body);

    let (status, _, body) = post_json(
        &client,
        &format!("{}/v1/messages/count_tokens", gw.url),
        request("replay-message", false),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "{\"input_tokens\":42}"));

    // Upstream got the host's key, the caller's headers and query, never the
    // caller's placeholder credential.
    {
        let seen = upstream.seen.lock().unwrap();
        assert_eq!(seen.len(), 7);
        for (pq, headers, _) in seen.iter() {
            assert_eq!(headers.get("x-api-key"), Some(&key));
            assert_eq!(
                headers.get("anthropic-beta").map(String::as_str),
                Some("test-beta-2026")
            );
            assert!(
                !headers.values().any(|v| v.contains("caller-placeholder")),
                "{headers:?}"
            );
            assert!(
                pq == "/v1/messages?beta=true" || pq == "/v1/messages/count_tokens",
                "{pq}"
            );
        }
    }

    let log = gw.stop();
    assert!(
        log.contains("model request"),
        "the trace log is empty?\n{log}"
    );
    for (what, text) in bodies
        .iter()
        .map(|b| ("a response", b.as_str()))
        .chain([("the log", log.as_str())])
    {
        assert!(!text.contains(&key), "the key appeared in {what}");
    }
    for f in ["data/g2.db", "data/g2.db-wal"] {
        if let Ok(bytes) = std::fs::read(home.path().join(f)) {
            assert!(
                memchr::memmem::find(&bytes, key.as_bytes()).is_none(),
                "the key is stored in {f}"
            );
        }
    }

    // Usage is read from what upstream reported.
    let rows = usage(&home);
    let row = |model: &str| {
        rows.iter()
            .find(|r| r["model"] == model)
            .unwrap_or_else(|| panic!("{model}: {rows:?}"))
    };
    assert_eq!(row("replay-stream")["input_tokens"], 472);
    assert_eq!(row("replay-stream")["cache_read_tokens"], 2048);
    assert_eq!(row("replay-stream")["output_tokens"], 15);
    assert_eq!(row("replay-message")["output_tokens"], 503);
    assert_eq!(row("replay-overloaded")["errors"], 1);
    assert_eq!(row("replay-stream-error")["errors"], 1);
    assert!(
        rows.iter()
            .all(|r| r["group"] == "@local" && r["provider"] == "anthropic")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_events_are_relayed_before_upstream_finishes() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
        ],
    );
    let resp = http_client()
        .post(format!("{}/v1/messages", gw.url))
        .json(&request("replay-hold", true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("the first event must arrive while upstream is still holding the rest")
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("event: message_start"));
    assert!(
        !upstream.finished.load(Ordering::SeqCst),
        "upstream had already finished"
    );
    upstream.release.notify_one();
    let mut all = first.to_vec();
    while let Some(chunk) = stream.next().await {
        all.extend_from_slice(&chunk.unwrap());
    }
    assert!(upstream.finished.load(Ordering::SeqCst));
    assert_eq!(String::from_utf8(all).unwrap(), recorded("stream.sse"));
}
