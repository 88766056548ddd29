//! What the gateway refuses, and how: each socket is its group's identity,
//! limits and bad requests answer with Anthropic's own errors.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_socket_is_its_groups_identity() {
    let home = TestHome::new();
    home.ok(&["groups", "add", "alpha", "--name", "Alpha"]);
    home.ok(&["groups", "add", "beta", "--name", "Beta"]);
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    let a = gw.sockets["alpha"].clone();
    let a = &a;
    assert_eq!(a, &home.path().join("data/ipc/alpha/model.sock"));
    assert_eq!(
        gw.sockets["beta"],
        home.path().join("data/ipc/beta/model.sock")
    );
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(a).unwrap().permissions().mode() & 0o777,
            0o666
        );
    }
    for _ in 0..3 {
        let body = alpha_ok(a, "/v1/messages").await;
        assert!(body.contains("received: \\\"Hello\\\""), "{body}");
    }
    // Nothing in a request can claim another group.
    let mut claim = request("m-alpha", false);
    claim["metadata"] = json!({ "user_id": "beta" });
    let resp = socket_client(a)
        .post("http://g2/v1/messages")
        .header("x-g2-group", "beta")
        .json(&claim)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (status, _, _) = post_json(
        &http_client(),
        &format!("{}/v1/messages", gw.url),
        request("m-tcp", true),
    )
    .await;
    assert_eq!(status, 200);
    let body = alpha_ok(a, "/v1/messages/count_tokens").await;
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );

    // Killed hard, the host leaves its socket files behind; the next start
    // replaces them. (Usage rows are written just after each answer; wait
    // for them so the kill does not race the writer.)
    let alpha_rows = |home: &TestHome| {
        usage(home)
            .iter()
            .filter(|r| r["group"] == "alpha")
            .map(|r| r["requests"].as_u64().unwrap())
            .sum::<u64>()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while alpha_rows(&home) < 5 {
        assert!(Instant::now() < deadline, "usage rows were not written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(gw);
    assert!(a.exists());
    let gw = GatewayProcess::start(&home, &[("G2_PROVIDER", "offline")]);
    alpha_ok(a, "/v1/messages").await;
    gw.stop();

    let rows = usage(&home);
    let by_group = |g: &str| {
        rows.iter()
            .filter(|r| r["group"] == g)
            .map(|r| r["requests"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(by_group("alpha"), 6, "{rows:?}");
    assert_eq!(by_group("beta"), 0, "{rows:?}");
    assert_eq!(by_group("@local"), 1, "{rows:?}");
    let only_alpha = home.json(&["usage", "--group", "alpha"]);
    assert!(
        only_alpha
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["group"] == "alpha")
    );
}

/// `alpha`'s plain request on its socket `a` at `path`, answered with a
/// 200: the body.
async fn alpha_ok(a: &Path, path: &str) -> String {
    let (status, _, body) = post_json(
        &socket_client(a),
        &format!("http://g2{path}"),
        request("m-alpha", false),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// `body` is Anthropic's rate limit error, its message saying `says`.
fn rate_limited(body: &str, says: &str) {
    let err: Value = serde_json::from_str(body).unwrap();
    assert_eq!(err["error"]["type"], "rate_limit_error");
    assert!(
        err["error"]["message"].as_str().unwrap().contains(says),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_refuse_with_anthropic_errors() {
    let upstream = Upstream::default();
    let base = upstream.start().await;
    let home = TestHome::new();
    std::fs::write(
        home.path().join("g2.toml"),
        "[gateway]\nmax_concurrent = 1\ndaily_tokens = 1000\n",
    )
    .unwrap();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-test"),
            ("G2_GATEWAY__UPSTREAM_URL", &base),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages", gw.url);

    // One request in flight takes the only slot.
    let held = client
        .post(&url)
        .json(&request("replay-hold", true))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(headers.get("retry-after").map(String::as_str), Some("1"));
    rate_limited(&body, "max_concurrent");

    // The held answer completes: 472 + 2048 + 15 tokens, over the budget.
    upstream.release.notify_one();
    let text = held.text().await.unwrap();
    assert!(text.ends_with("data: {\"type\":\"message_stop\"}\n\n"));

    let (status, headers, body) = post_json(&client, &url, request("replay-stream", true)).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(
        headers.get("x-should-retry").map(String::as_str),
        Some("false")
    );
    rate_limited(&body, "2535 of its 1000 tokens");
    gw.stop();

    let rows = usage(&home);
    let refused: u64 = rows.iter().map(|r| r["refused"].as_u64().unwrap()).sum();
    assert_eq!(refused, 2, "{rows:?}");
    assert_eq!(
        upstream.seen.lock().unwrap().len(),
        1,
        "refused requests must not reach upstream"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_anthropic_errors() {
    let home = TestHome::new();
    let gw = GatewayProcess::start(
        &home,
        &[
            ("G2_PROVIDER", "offline"),
            ("G2_GATEWAY__MAX_REQUEST_BYTES", "4096"),
        ],
    );
    let client = http_client();
    let url = format!("{}/v1/messages", gw.url);
    let error_of = |body: &str| -> (String, String) {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(v["type"], "error");
        (
            v["error"]["type"].as_str().unwrap().into(),
            v["error"]["message"].as_str().unwrap().into(),
        )
    };
    let cases: Vec<(Bytes, u16, &str)> = vec![
        (
            Bytes::from_static(b"{not json"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from_static(b"{\"max_tokens\":5}"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from_static(b"{\"model\":\"m\",\"messages\":\"nope\"}"),
            400,
            "invalid_request_error",
        ),
        (
            Bytes::from(format!(
                "{{\"model\":\"m\",\"pad\":\"{}\"}}",
                "x".repeat(8000)
            )),
            413,
            "request_too_large",
        ),
    ];
    for (body, want, kind) in cases {
        let resp = client.post(&url).body(body.clone()).send().await.unwrap();
        assert_eq!(
            resp.status().as_u16(),
            want,
            "{:?}",
            &body[..body.len().min(40)]
        );
        let (k, msg) = error_of(&resp.text().await.unwrap());
        assert_eq!(k, kind, "{msg}");
        assert!(!msg.is_empty());
    }
    let resp = client
        .get(format!("{}/v1/models", gw.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(error_of(&resp.text().await.unwrap()).0, "not_found_error");
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let resp = client
            .get(format!("{}{path}", gw.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 405, "{path}");
        assert_eq!(resp.headers()["allow"], "POST");
        assert_eq!(
            error_of(&resp.text().await.unwrap()).0,
            "invalid_request_error"
        );
    }
    // Still serving.
    let (status, _, _) = post_json(&client, &url, request("m", false)).await;
    assert_eq!(status, 200);

    // Refused configurations.
    let out = home.fails(&["gateway", "--listen", "0.0.0.0:0"]);
    assert!(out.contains("only loopback"), "{out}");
    let out = home.g2_with(
        &["gateway", "--listen", "127.0.0.1:0"],
        &[("G2_PROVIDER", "anthropic")],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ANTHROPIC_API_KEY"));
}
