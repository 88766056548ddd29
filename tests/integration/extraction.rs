//! Memory extraction in a running host: through the gateway's provider,
//! accounted to the group, capped per day, and surviving a host killed in
//! the middle of a job. The `anthropic` provider is pointed at a local
//! server that speaks the Messages API (the real one cannot be reached
//! from here).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use axum::{Json, Router};
use serde_json::{Value, json};

use g2_host::store::{self, memory};

use crate::steps::{Chat, item};
use crate::support::*;

/// A Messages API server answering g2's extraction requests: while
/// `holding`, it takes a request and never answers; then it answers a
/// batch about the boat with prose first (not the JSON asked for) and
/// with JSON when asked again, and a batch saying "garbled" with prose
/// every time.
#[derive(Clone, Default)]
struct Extractor {
    holding: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Value>>>,
}

fn message(text: &str) -> Value {
    json!({
        "id": "msg_local", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{ "type": "text", "text": text }],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": { "input_tokens": 700, "output_tokens": 60 },
    })
}

async fn answer(State(x): State<Extractor>, Json(req): Json<Value>) -> Response {
    x.seen.lock().unwrap().push(req.clone());
    if x.holding.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let first = req["messages"][0]["content"].as_str().unwrap_or_default();
    let asked_again = req["messages"].as_array().map_or(0, Vec::len) > 1;
    let text = if first.contains("<session>") {
        json!({ "title": "The boat's mooring", "request": "where the boat is",
                "investigated": "", "learned": "The boat is at pier 7.",
                "completed": "", "next_steps": "" })
        .to_string()
    } else if first.contains("pier 7") && asked_again {
        json!({ "observations": [{ "kind": "fact", "title": "The boat is moored at pier 7",
                "narrative": "Ann said where the boat is.", "importance": 8,
                "concerns": ["Ann"] }] })
        .to_string()
    } else {
        "Sure! The boat is at pier 7, as far as I can tell.".to_string()
    };
    Json(message(&text)).into_response()
}

impl Extractor {
    async fn start(&self) -> String {
        let app = Router::new()
            .route("/v1/messages", route_post(answer))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }
}

/// A completed session of `main` with one completed batch per prompt, as
/// capture leaves it.
fn captured(home: &TestHome, prompts: &[&str]) {
    let prompts: Vec<String> = prompts.iter().map(ToString::to_string).collect();
    home.store()
        .write_blocking(move |tx| {
            let at = "2026-05-01T10:00:00.000Z";
            let s = memory::open_session(tx, &gf("main"), "sess-boat", None, None, at)?;
            for p in &prompts {
                let b = memory::start_batch(tx, s, &format!("Ann: {p}"), &["Ann".into()], at)?;
                memory::finish_batch(tx, b, Some("Noted."), at)?;
            }
            memory::end_session(tx, s, Some("clear"), at)?;
            Ok(())
        })
        .unwrap();
}

/// `(state, error)` of each batch job, in order.
fn batch_jobs(home: &TestHome) -> Vec<(String, Option<String>)> {
    home.store()
        .read_blocking(|c| {
            store::query_all(
                c,
                "SELECT state, error FROM memory_queue ORDER BY batch_id",
                (),
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .unwrap()
}

fn until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_during_extraction_resumes_the_job_and_stores_it_once() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    captured(
        &home,
        &["remember that the boat is moored at pier 7", "garbled"],
    );
    let upstream = Extractor::default();
    upstream.holding.store(true, Ordering::SeqCst);
    let url = upstream.start().await;
    let env = [
        ("ANTHROPIC_API_KEY", "sk-ant-local-test-key"),
        ("G2_GATEWAY__UPSTREAM_URL", url.as_str()),
        ("G2_MEMORY__PROCESS_INTERVAL_SECS", "1"),
    ];
    let mut s = serve(&home, &env);
    // The first batch's request is held upstream: the job is under way.
    until("the extraction request", 60, || {
        (!upstream.seen.lock().unwrap().is_empty()).then_some(())
    });
    assert_eq!(batch_jobs(&home)[0].0, "processing");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);

    upstream.holding.store(false, Ordering::SeqCst);
    let s = serve(&home, &env);
    let jobs = until("both batch jobs settled", 60, || {
        let j = batch_jobs(&home);
        j.iter()
            .all(|(state, _)| state == "done" || state == "failed")
            .then_some(j)
    });
    // The resumed job stored its observation once, after asking again for
    // the JSON; the garbled one failed for good, with the reason.
    assert_eq!(jobs[0], ("done".to_string(), None), "{jobs:?}");
    assert_eq!(jobs[1].0, "failed", "{jobs:?}");
    assert!(
        jobs[1]
            .1
            .as_deref()
            .unwrap_or_default()
            .contains("no JSON object"),
        "{jobs:?}"
    );
    let list = home.json(&["memory", "observations", "main"]);
    let titles: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["The boat is moored at pier 7"], "{list}");
    // Every request was one batch or session, and an extraction request:
    // none ever carried the host's key beyond upstream's own header.
    let seen = upstream.seen.lock().unwrap().clone();
    for req in &seen {
        assert_eq!(req["model"], "claude-haiku-4-5", "{req}");
        assert!(
            req["system"]
                .as_str()
                .unwrap()
                .starts_with("You are g2's memory extractor."),
            "{req}"
        );
    }
    // Held (killed), then twice for the boat, twice for "garbled", once
    // for the session's summary.
    let summary = until("the session's summary", 60, || {
        home.store()
            .read_blocking(|c| store::observations::summary(c, &gf("main"), "sess-boat"))
            .unwrap()
    });
    assert_eq!(summary.title, "The boat's mooring");
    assert_eq!(upstream.seen.lock().unwrap().len(), 6);
    // Accounted to the group, as memory.
    let usage = home.json(&["usage", "--group", "main"]);
    let memory = item(&usage, "purpose", "memory");
    assert_eq!(memory["provider"], "anthropic", "{usage}");
    assert!(memory["requests"].as_u64() >= Some(5), "{usage}");
    assert!(memory["input_tokens"].as_u64() >= Some(5 * 700), "{usage}");
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(
        log.contains("memory jobs a stopped host left resumed"),
        "{log}"
    );
    assert!(!log.contains("sk-ant-local-test-key"));
    drop(s);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_memory_budget_stops_extraction_and_the_agent_keeps_answering() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(
        &home,
        &[
            ("G2_MEMORY__PROCESS_INTERVAL_SECS", "1"),
            ("G2_MEMORY__DAILY_TOKENS", "100"),
        ],
    );
    let mut main = Chat::open(&s.url, "main").await;
    let first = main
        .say("Ann", "remember that the boat is moored at pier 7")
        .await;
    assert!(first.contains("pier 7"), "{first}");
    let reason = until("the job paused with its reason", 90, || {
        batch_jobs(&home)
            .into_iter()
            .find_map(|(state, error)| (state == "pending").then_some(error).flatten())
    });
    assert!(reason.contains("memory.daily_tokens"), "{reason}");
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(
        log.contains("memory extraction paused for the group")
            && log.contains("memory.daily_tokens"),
        "{log}"
    );
    // The agent still answers; nothing was extracted or spent on memory.
    let second = main.say("Bob", "what is the capital of France?").await;
    assert!(second.contains("capital of France"), "{second}");
    let list = home.json(&["memory", "observations", "main"]);
    assert_eq!(list, Value::Array(vec![]), "{list}");
    let usage = home.json(&["usage", "--group", "main"]);
    let spent: u64 = usage
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["purpose"] == "memory")
        .map(|l| l["input_tokens"].as_u64().unwrap() + l["output_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(spent, 0, "{usage}");
}
