//! What the memory layer captured, read back through `g2 memory` and the
//! HTTP API; a session of another group is never found through a group.
//!
//! Here: reading it back; `capture.rs`: what a run leaves; `recall.rs`:
//! what memory gives back.

use serde_json::Value;

use g2_host::store::memory::{self, NewActivity};

use crate::steps::{Chat, item};
use crate::support::*;

mod capture;
mod dated;
mod recall;
mod redate;
mod search_cli;

/// A session of `main` with one prompt, one tool call and the reply, as
/// capture stores it.
fn captured(home: &TestHome, session: &str) {
    home.store()
        .write_blocking(|tx| {
            let s = memory::open_session(
                tx,
                &gf("main"),
                session,
                Some("startup"),
                None,
                "2026-11-22T09:00:00.000Z",
            )?;
            let b = memory::start_batch(
                tx,
                s,
                "we need milk",
                &["Ann".into()],
                "2026-11-22T09:00:01.000Z",
            )?;
            let files = ["notes.md".to_string()];
            memory::add_activity(
                tx,
                s,
                Some(b),
                &NewActivity {
                    tool: "Write",
                    tool_use_id: "toolu_1",
                    input: r#"{"file_path":"notes.md"}"#,
                    output: "ok",
                    files_modified: &files,
                    ok: true,
                    at: "2026-11-22T09:00:02.000Z",
                    ..Default::default()
                },
            )?;
            memory::finish_batch(tx, b, Some("Noted: milk."), "2026-11-22T09:00:03.000Z")
        })
        .unwrap();
}

#[test]
fn memory_from_the_command_line() {
    let home = TestHome::new();
    let list = home.json(&["memory", "sessions", "main"]);
    assert_eq!(list, Value::Array(vec![]));
    captured(&home, "sess-a");
    let list = home.json(&["memory", "sessions", "main"]);
    assert_eq!(list[0]["session_id"], "sess-a");
    assert_eq!(
        (list[0]["prompts"].as_i64(), list[0]["tool_calls"].as_i64()),
        (Some(1), Some(1))
    );
    let t = home.json(&["memory", "show", "sess-a"]);
    assert_eq!(t["batches"][0]["prompt"], "we need milk");
    assert_eq!(t["batches"][0]["senders"][0], "Ann");
    assert_eq!(t["batches"][0]["activities"][0]["tool"], "Write");
    assert_eq!(
        t["batches"][0]["activities"][0]["files_modified"][0],
        "notes.md"
    );
    assert_eq!(t["batches"][0]["reply"], "Noted: milk.");
    let text = home.ok(&["memory", "show", "sess-a"]);
    assert!(
        text.contains("we need milk") && text.contains("Write"),
        "{text}"
    );
    let err = home.fails(&["memory", "sessions", "../main"]);
    assert!(err.contains("invalid group folder"), "{err}");
    let err = home.fails(&["memory", "sessions", "nogroup"]);
    assert!(err.contains("not registered"), "{err}");
    home.ok(&["memory", "forget", "--session", "sess-a"]);
    assert_eq!(
        home.json(&["memory", "sessions", "main"]),
        Value::Array(vec![])
    );
    let err = home.fails(&["memory", "forget", "--session", "sess-a"]);
    assert!(err.contains("no captured session"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_over_http_stays_in_its_group() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "fam", "--name", "Family"]);
    captured(&home, "sess-a");
    let s = serve(&home, &[]);
    let c = http_client();
    let get = |p: String| {
        let c = c.clone();
        async move {
            let r = c.get(p).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let (st, list) = get(format!("{}/api/groups/main/memory/sessions", s.url)).await;
    assert_eq!(
        (st, list[0]["session_id"].as_str()),
        (200, Some("sess-a")),
        "{list}"
    );
    let (st, t) = get(format!("{}/api/groups/main/memory/sessions/sess-a", s.url)).await;
    assert_eq!(
        (st, t["batches"][0]["prompt_number"].as_i64()),
        (200, Some(1)),
        "{t}"
    );
    // Through another group, the session does not exist.
    let (st, e) = get(format!("{}/api/groups/fam/memory/sessions/sess-a", s.url)).await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (404, Some("not_found")),
        "{e}"
    );
    let (st, list) = get(format!("{}/api/groups/fam/memory/sessions", s.url)).await;
    assert_eq!((st, list), (200, Value::Array(vec![])));
    let (st, e) = get(format!("{}/api/groups/..%2Fmain/memory/sessions", s.url)).await;
    assert_eq!(
        (st, e["error"]["kind"].as_str()),
        (400, Some("invalid")),
        "{e}"
    );
}
