//! The per-stage trace of a turn (`g2::turn` at debug): a warm turn with a
//! tool call through `g2 serve`, Docker, Claude Code and the offline model
//! names every stage of `Stage::ALL` in the log, host and container stamps
//! alike, in the order a turn passes them; the synchronous pieces show as
//! spans.

use std::time::{Duration, Instant};

use g2_core::trace::Stage;
use serde_json::Value;

use crate::support::*;

/// One stage event of the log.
#[derive(Debug, Clone)]
struct Event {
    stage: String,
    group: Option<String>,
    hook: Option<String>,
    seq: Option<i64>,
    at_us: u64,
}

/// The stage events and the closed spans' names in the JSON log.
fn read_log(path: &std::path::Path) -> (Vec<Event>, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (mut events, mut spans) = (Vec::new(), Vec::new());
    for v in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if v["target"] != "g2::turn" {
            continue;
        }
        let f = &v["fields"];
        if f["message"] == "close" {
            spans.extend(v["span"]["name"].as_str().map(str::to_string));
            continue;
        }
        let (Some(stage), Some(at_us)) = (f["stage"].as_str(), f["at_us"].as_u64()) else {
            continue;
        };
        events.push(Event {
            stage: stage.into(),
            group: f["group"].as_str().map(str::to_string),
            hook: f["hook"].as_str().map(str::to_string),
            seq: f["seq"].as_i64(),
            at_us,
        });
    }
    (events, spans)
}

/// The first `stage` (of `hook`, if named) for `main` at or after `from`.
fn first(events: &[Event], stage: Stage, hook: Option<&str>, from: u64) -> Option<u64> {
    events
        .iter()
        .filter(|e| e.stage == stage.as_str() && e.at_us >= from)
        .filter(|e| stage == Stage::Published || e.group.as_deref() == Some("main"))
        .filter(|e| hook.is_none() || e.hook.as_deref() == hook)
        .map(|e| e.at_us)
        .min()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_turn_names_every_stage_in_order() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(
        &home,
        &[("G2_LOG", "warn,g2::turn=debug"), ("G2_LOG_FORMAT", "json")],
    );
    let mut main = Sse::open(&s.url, "main", None).await;
    post(&s.url, "main", "ann", "a cold start").await;
    main.reply(120).await;
    // A warm turn with one tool call: its PostToolUse hook is the turn's
    // only hook process (the prompt's memory and capture are the runner's).
    let seq = post(&s.url, "main", "ann", "g2:bash echo warm").await;
    assert_eq!(main.reply(60).await, "g2:bash echo warm: warm");

    // The capture intake may finish after the reply: poll the log.
    let log = home.path().join("serve.log");
    let deadline = Instant::now() + Duration::from_secs(20);
    let (events, spans, from) = loop {
        let (events, spans) = read_log(&log);
        let from = events
            .iter()
            .find(|e| e.stage == "stored" && e.seq == Some(seq))
            .map(|e| e.at_us);
        if let Some(from) = from
            && Stage::ALL
                .iter()
                .all(|s| first(&events, *s, None, from).is_some())
        {
            break (events, spans, from);
        }
        assert!(
            Instant::now() < deadline,
            "stages missing after the warm turn (stored at {from:?}): {:?}\n{events:#?}",
            Stage::ALL
                .iter()
                .filter(|s| from.is_none_or(|f| first(&events, **s, None, f).is_none()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let tool = Some("PostToolUse");
    let at = |stage, hook| {
        first(&events, stage, hook, from)
            .unwrap_or_else(|| panic!("no {stage:?} {hook:?} for main: {events:#?}"))
    };
    // The reply is published under its own seq (the log knows its chat).
    let reply_seq = events
        .iter()
        .find(|e| {
            e.stage == "reply_stored" && e.group.as_deref() == Some("main") && e.at_us >= from
        })
        .and_then(|e| e.seq)
        .expect("the reply's seq");
    assert!(
        events
            .iter()
            .any(|e| e.stage == "published" && e.seq == Some(reply_seq)),
        "the reply (seq {reply_seq}) published: {events:#?}"
    );
    let order = [
        ("stored", at(Stage::Stored, None)),
        ("woken", at(Stage::Woken, None)),
        ("handed_over", at(Stage::HandedOver, None)),
        ("runner_read", at(Stage::RunnerRead, None)),
        ("memory_asked", at(Stage::MemoryAsked, None)),
        ("memory_context", at(Stage::MemoryContext, None)),
        ("memory_received", at(Stage::MemoryReceived, None)),
        ("stdin_written", at(Stage::StdinWritten, None)),
        ("model_request", at(Stage::ModelRequest, None)),
        ("model_answered", at(Stage::ModelAnswered, None)),
        ("hook_start PostToolUse", at(Stage::HookStart, tool)),
        ("hook_end PostToolUse", at(Stage::HookEnd, tool)),
        ("result", at(Stage::Result, None)),
        ("reply_frame", at(Stage::ReplyFrame, None)),
        ("reply_stored", at(Stage::ReplyStored, None)),
        ("published", at(Stage::Published, None)),
    ];
    // The prompt's memory is made while Claude Code works on the prompt,
    // and put into its model request by the gateway.
    let (made, attached) = (
        at(Stage::MemoryAnswered, None),
        at(Stage::MemoryAttached, None),
    );
    assert!(
        at(Stage::MemoryContext, None) <= made
            && made <= attached
            && at(Stage::ModelRequest, None) <= attached
            && attached <= at(Stage::Result, None),
        "memory made at {made}, attached at {attached}: {order:#?}"
    );
    // `input_written` is stamped once the rename returned: the runner may
    // have read the file by then, so it is ordered against the host's own
    // stages only.
    let written = at(Stage::InputWritten, None);
    assert!(
        at(Stage::HandedOver, None) <= written && written <= at(Stage::ReplyFrame, None),
        "input_written ({written}) out of the host's order: {order:#?}"
    );
    for w in order.windows(2) {
        assert!(
            w[0].1 <= w[1].1,
            "{} ({}) after {} ({}): {order:#?}",
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
    // The whole turn took a plausible time (the clocks agree).
    let took = order[order.len() - 1].1 - order[0].1;
    assert!(took < 30_000_000, "{took} µs: {order:#?}");
    for span in ["hand_over", "memory_answer", "store_reply"] {
        assert!(spans.iter().any(|s| s == span), "no {span} span: {spans:?}");
    }
}
