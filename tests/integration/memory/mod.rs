//! What the memory layer captured, read back through `g2 memory` and the
//! HTTP API; a session of another group is never found through a group.

use serde_json::Value;

use g2_host::store::memory::{self, NewActivity};

use crate::support::*;

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

fn run(home: &TestHome, prompt: &str) -> Value {
    let out = home.g2(&["run", "main", prompt, "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "g2 run {prompt:?}: {e}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every value of every table of the database but the chat's own message
/// log (what people sent), full-text index data included, as text, with
/// the table it is in.
fn database_dump(home: &TestHome) -> String {
    use rusqlite::types::ValueRef;
    home.store()
        .read_blocking(|c| {
            // The dump reads SQLite's own catalogue and FTS5 shadow tables.
            let c = c.as_sqlite().expect("a SQLite home");
            let tables: Vec<String> = c
                .prepare(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'messages'",
                )?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            assert!(
                tables.iter().any(|t| t == "activities_fts_data"),
                "{tables:?}"
            );
            let mut all = String::new();
            for t in tables {
                let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\""))?;
                let n = stmt.column_count();
                let mut rows = stmt.query([])?;
                while let Some(row) = rows.next()? {
                    for i in 0..n {
                        let text = match row.get_ref(i)? {
                            ValueRef::Text(b) | ValueRef::Blob(b) => String::from_utf8_lossy(b),
                            _ => continue,
                        };
                        all.push_str(&format!("{t}: {text}\n"));
                    }
                }
            }
            Ok(all)
        })
        .unwrap()
}

/// Where `needle` is: the lines of [`database_dump`] holding it.
fn found_in_database(home: &TestHome, needle: &str) -> Vec<String> {
    database_dump(home)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_run_is_captured_prompt_by_prompt_and_clean() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
    let first = run(
        &home,
        &format!("g2:bash echo one {key}\ng2:remember milk is on the list"),
    );
    let sid = first["session_id"].as_str().unwrap().to_string();
    let list = home.json(&["memory", "sessions", "main"]);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["session_id"], sid.as_str());
    let t = home.json(&["memory", "show", &sid]);
    let b = &t["batches"][0];
    assert_eq!(b["prompt_number"], 1, "{t}");
    assert!(
        b["prompt"].as_str().unwrap().contains("g2:bash echo one"),
        "{t}"
    );
    let tools: Vec<&str> = b["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["Bash", "Read", "Write"], "{t}");
    let bash = &b["activities"][0];
    assert!(
        bash["input"]["command"]
            .as_str()
            .unwrap()
            .contains("echo one"),
        "{bash}"
    );
    assert!(
        bash["output"].as_str().unwrap().contains("[redacted:"),
        "{bash}"
    );
    let write = &b["activities"][2];
    assert!(
        write["files_modified"][0]
            .as_str()
            .unwrap()
            .ends_with("CLAUDE.md"),
        "{write}"
    );
    assert!(b["reply"].as_str().is_some_and(|r| !r.is_empty()), "{t}");

    // The next message resumes the session: its prompt number 2.
    let second = run(&home, "note <private>my pin is 4417</private> for later");
    assert_eq!(second["session_id"], sid.as_str());
    let t = home.json(&["memory", "show", &sid]);
    assert_eq!(t["batches"][1]["prompt_number"], 2, "{t}");

    // `g2:clear` archives the session the host's way.
    let cleared = run(&home, "g2:clear Groceries");
    let reply = cleared["replies"][0].as_str().unwrap_or_default();
    assert!(reply.contains("bookmarked as \"Groceries\""), "{cleared}");
    let conversations = home.path().join("groups/main/conversations");
    let archives: Vec<String> = std::fs::read_dir(&conversations)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(archives.len(), 1, "{archives:?}");
    assert!(
        archives[0].contains("[redacted:anthropic-key]"),
        "{}",
        archives[0]
    );
    assert!(archives[0].contains("for later"), "{}", archives[0]);

    // Neither the pin nor the key is anywhere in g2's storage: no table
    // but the message log, no index, archive or event file.
    for needle in ["4417", key] {
        assert_eq!(
            found_in_database(&home, needle),
            Vec::<String>::new(),
            "{needle}"
        );
        for sub in [
            "data/ipc/main/events",
            "data/ipc/main/errors",
            "groups/main/conversations",
        ] {
            let dir = home.path().join(sub);
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                assert!(!text.contains(needle), "{needle} in {}", e.path().display());
            }
        }
    }
    // The scan would see them: the key's redacted form is in the activities.
    assert!(
        !found_in_database(&home, "[redacted:anthropic-key]").is_empty(),
        "the scan reads the tables"
    );
}

/// Polls the group's captured sessions until `done` holds (the intake takes
/// events in as they come, not when the warm container exits).
async fn captured_until(c: &reqwest::Client, base: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list: Value = c
            .get(format!("{base}/api/groups/main/memory/sessions"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null);
        if done(&list) {
            return list;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "capture never got there: {list}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// A captured session of `main`, over HTTP.
async fn timeline(base: &str, sid: &str) -> Value {
    get_json(&format!("{base}/api/groups/main/memory/sessions/{sid}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_messages_in_a_warm_container_are_prompts_of_one_session() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let c = http_client();
    let mut main = Sse::open(&s.url, "main", None).await;
    post(&s.url, "main", "ann", "g2:bash echo one").await;
    main.reply(120).await;
    // Taken in while the container is still up (it stays warm).
    let list = captured_until(&c, &s.url, |l| l[0]["tool_calls"].as_i64() >= Some(1)).await;
    let sid = list[0]["session_id"].as_str().unwrap().to_string();
    post(&s.url, "main", "bob", "second one").await;
    main.reply(60).await;
    let list = captured_until(&c, &s.url, |l| l[0]["prompts"].as_i64() == Some(2)).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["session_id"], sid.as_str());
    let t = timeline(&s.url, &sid).await;
    // Who said what, not the envelope.
    assert_eq!(t["batches"][0]["prompt"], "ann: g2:bash echo one", "{t}");
    assert_eq!(t["batches"][0]["senders"][0], "ann");
    assert_eq!(t["batches"][0]["activities"][0]["tool"], "Bash");
    assert_eq!(t["batches"][1]["prompt"], "bob: second one", "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_mid_tool_call_leaves_capture_consistent() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let env = [
        ("G2_MEMORY__RECOVERY_INTERVAL_SECS", "1"),
        ("G2_MEMORY__BATCH_IDLE_SECS", "2"),
        ("G2_MEMORY__SESSION_IDLE_SECS", "4"),
    ];
    let c = http_client();
    let mut s = serve(&home, &env);
    post(
        &s.url,
        "main",
        "ann",
        "g2:bash timeout 8 tail -f /dev/null; echo slow-done",
    )
    .await;
    // The prompt is captured, and the slow Bash call is under way (as in
    // routing's kill test: the container up, 3 s into the turn); then -9.
    captured_until(&c, &s.url, |l| l[0]["prompts"].as_i64() >= Some(1)).await;
    wait_for_container(&home);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    s.child.kill().unwrap();
    s.child.wait().unwrap();

    let s = serve(&home, &env);
    // Should the answer not come, the host's log says why.
    let (answered, waiting) = std::sync::mpsc::channel::<()>();
    let log = home.path().join("serve.log");
    std::thread::spawn(move || {
        if waiting.recv().is_err() {
            eprintln!(
                "serve.log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
    });
    let mut main = Sse::open(&s.url, "main", Some(0)).await;
    let r = main.reply(180).await;
    let _ = answered.send(());
    assert!(r.contains("slow-done"), "{r}");
    // Idle afterwards: recovery completes every batch and session.
    let list = captured_until(&c, &s.url, |l| {
        l.as_array()
            .is_some_and(|a| !a.is_empty() && a.iter().all(|x| x["status"] == "completed"))
    })
    .await;
    for session in list.as_array().unwrap() {
        let sid = session["session_id"].as_str().unwrap();
        let t = timeline(&s.url, sid).await;
        let batches = t["batches"].as_array().unwrap();
        // Completed, or already taken on by the memory processor.
        assert!(
            batches
                .iter()
                .all(|b| b["status"] == "completed" || b["status"] == "processed"),
            "{t}"
        );
        let numbers: Vec<i64> = batches
            .iter()
            .map(|b| b["prompt_number"].as_i64().unwrap())
            .collect();
        let mut unique = numbers.clone();
        unique.dedup();
        assert_eq!(numbers, unique, "no prompt twice: {t}");
    }
    // Nothing is left behind to take in twice.
    let events = home.path().join("data/ipc/main/events");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left: Vec<String> = std::fs::read_dir(&events)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left: {left:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[test]
fn a_group_with_capture_off_keeps_nothing_of_its_sessions() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    assert!(
        home.ok(&["groups", "capture", "main", "off"])
            .contains("off")
    );
    let groups = home.json(&["groups", "list"]);
    assert_eq!(
        groups[0]["container_config"]["memory"]["capture"], false,
        "{groups}"
    );
    run(&home, "g2:bash echo one");
    assert_eq!(
        home.json(&["memory", "sessions", "main"]),
        Value::Array(vec![])
    );
    let events = home.path().join("data/ipc/main/events");
    let left: Vec<_> = std::fs::read_dir(&events)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".json"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // On again: the next run is captured.
    home.ok(&["groups", "capture", "main", "on"]);
    run(&home, "g2:bash echo two");
    let list = home.json(&["memory", "sessions", "main"]);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    let err = home.fails(&["groups", "capture", "main", "maybe"]);
    assert!(err.contains("maybe"), "{err}");
}

/// Polls `url` until `done` holds on its JSON.
async fn json_until(url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let v = get_json(url).await;
        if done(&v) {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "never got there: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// `g2 serve` with a quick memory processor, where Ann asked the agent of
/// `main` to remember where the boat is, and it answered.
async fn ann_asks_to_remember_the_boat(home: &TestHome) -> (Serve, Sse) {
    let s = serve(home, &[("G2_MEMORY__PROCESS_INTERVAL_SECS", "1")]);
    let mut main = Sse::open(&s.url, "main", None).await;
    post(
        &s.url,
        "main",
        "Ann",
        "remember that the boat is moored at pier 7",
    )
    .await;
    main.reply(120).await;
    (s, main)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_people_ask_to_remember_is_recalled_first_until_forgotten() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let (s, mut main) = ann_asks_to_remember_the_boat(&home).await;
    post(&s.url, "main", "Bob", "we always buy bread on Fridays").await;
    main.reply(60).await;
    // The processor extracts each completed prompt in the background.
    let base = format!("{}/api/groups/main/memory", s.url);
    let list = json_until(&format!("{base}/observations"), |v| {
        v.as_array().is_some_and(|a| a.len() >= 2)
    })
    .await;
    let boat = list
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["title"] == "the boat is moored at pier 7")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(boat["kind"], "fact", "{boat}");
    assert_eq!(boat["concerns"][0], "Ann", "{boat}");
    let id = boat["id"].as_i64().unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|o| o["kind"] == "preference" && o["concerns"][0] == "Bob"),
        "{list}"
    );
    // Asked the way people ask, the observation ranks first.
    let hits = get_json(&format!("{base}/search?q=where%20is%20the%20boat%3F")).await;
    assert_eq!(hits[0]["kind"], "observation", "{hits}");
    assert_eq!(hits[0]["id"], id, "{hits}");
    // Another group knows nothing of it and cannot forget it.
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    let other = get_json(&format!("{}/api/groups/family/memory/search?q=boat", s.url)).await;
    assert_eq!(other, Value::Array(vec![]), "{other}");
    let c = http_client();
    let r = c
        .delete(format!(
            "{}/api/groups/family/memory/observations/{id}",
            s.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Forgotten: gone from recall, a tombstone left.
    let r = c
        .delete(format!("{base}/observations/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let hits = get_json(&format!("{base}/search?q=where%20is%20the%20boat%3F")).await;
    assert!(
        hits.as_array()
            .unwrap()
            .iter()
            .all(|h| h["kind"] != "observation"),
        "{hits}"
    );
    let all = get_json(&format!("{base}/observations?all=true")).await;
    let tomb = all
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .unwrap();
    assert_eq!(
        (tomb["status"].as_str(), tomb["title"].as_str()),
        (Some("forgotten"), Some(""))
    );
    // Gone from injection too: a new session starts without it, and a
    // question about it brings the archived conversation (which forgetting
    // an observation leaves, as it leaves the session's summary), not the
    // observation.
    post(&s.url, "main", "Bob", "g2:clear Boat").await;
    main.reply(120).await;
    post(
        &s.url,
        "main",
        "Bob",
        "where is the boat moored?\ng2:context",
    )
    .await;
    let shown = main.reply(120).await;
    let at_start = shown.split(PROMPT_BLOCK).next().unwrap_or_default();
    assert!(at_start.contains("bread on Fridays"), "{shown}");
    assert!(
        !at_start.contains("] the boat is moored at pier 7"),
        "{shown}"
    );
    // The prompt's block: the archived turn, not the observation.
    assert!(
        !injected_ids(&shown).iter().any(|id| id.starts_with('o')),
        "{shown}"
    );
    assert!(
        injected_ids(&shown).iter().any(|id| id.starts_with('p')),
        "{shown}"
    );
}

/// The header of the block a prompt is given (`memory::context`).
const PROMPT_BLOCK: &str = "Memory that may bear on this message";

/// The ids of the memories in the prompt blocks of `shown` (`- [day id …]`).
fn injected_ids(shown: &str) -> Vec<String> {
    shown
        .split(PROMPT_BLOCK)
        .skip(1)
        .flat_map(|block| block.split("</g2-memory>").next().unwrap_or("").lines())
        .filter_map(|l| l.strip_prefix("- ["))
        .filter_map(|l| {
            l.split(']')
                .next()?
                .split_whitespace()
                .nth(1)
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_outlives_a_clear_and_comes_with_related_prompts_only() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let (s, mut main) = ann_asks_to_remember_the_boat(&home).await;
    let base = format!("{}/api/groups/main/memory", s.url);
    json_until(&format!("{base}/observations"), |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    // Bob clears the session: a new one starts with the group's memory.
    post(&s.url, "main", "Bob", "g2:clear Boat").await;
    let cleared = main.reply(120).await;
    assert!(cleared.contains("bookmarked"), "{cleared}");
    post(&s.url, "main", "Bob", "g2:context").await;
    let shown = main.reply(120).await;
    assert!(shown.contains("<g2-memory>"), "{shown}");
    assert!(shown.contains("the boat is moored at pier 7"), "{shown}");
    // A related question brings its memory with it; an unrelated one none.
    post(
        &s.url,
        "main",
        "Bob",
        "where is the boat moored?\ng2:context",
    )
    .await;
    let related = main.reply(120).await;
    assert!(related.contains(PROMPT_BLOCK), "{related}");
    post(
        &s.url,
        "main",
        "Bob",
        "what is the capital of France?\ng2:context",
    )
    .await;
    let unrelated = main.reply(120).await;
    assert_eq!(
        unrelated.matches(PROMPT_BLOCK).count(),
        related.matches(PROMPT_BLOCK).count(),
        "no new block for an unrelated prompt: {unrelated}"
    );
    // Turned off for the group: a new session starts without memory.
    home.ok(&["groups", "inject", "main", "off"]);
    post(&s.url, "main", "Bob", "g2:clear Quiet").await;
    main.reply(120).await;
    post(&s.url, "main", "Bob", "g2:context").await;
    let off = main.reply(120).await;
    assert!(off.contains("no memory was injected"), "{off}");
}

/// `g2 run <folder> <prompt>`: the agent's replies, joined.
fn ask(home: &TestHome, folder: &str, prompt: &str) -> String {
    let out = home.g2(&["run", folder, prompt, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "g2 run {prompt:?}: {e}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["replies"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn the_agents_memory_tools_reach_their_own_group_only() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    let said = ask(
        &home,
        "main",
        "g2:memory-remember the boat is moored at pier 7",
    );
    assert!(said.contains("Remembered as o1"), "{said}");
    let found = ask(&home, "main", "g2:memory-search where is the boat");
    let first = found.lines().nth(1).unwrap_or_default();
    assert!(
        first.starts_with("o1 fact ") && first.contains("pier 7"),
        "{found}"
    );
    let got = ask(&home, "main", "g2:memory-get o1");
    assert!(
        got.contains("importance 9") && got.contains("pier 7"),
        "{got}"
    );

    // Asked about it, main's agent gets it injected; family's never does,
    // at the session's start or with the prompt.
    let q = "where is the boat moored?\ng2:context";
    let ours = ask(&home, "main", q);
    assert!(ours.contains("pier 7"), "{ours}");
    let theirs = ask(&home, "family", q);
    assert!(!theirs.contains("pier 7"), "{theirs}");
    assert!(theirs.contains("no memory was injected"), "{theirs}");

    // Another group finds nothing of it, and may neither read nor forget it.
    let theirs = ask(&home, "family", "g2:memory-search where is the boat");
    assert!(!theirs.contains("pier 7"), "{theirs}");
    assert!(!theirs.contains(" fact "), "{theirs}");
    for cmd in [
        "g2:memory-get o1",
        "g2:memory-forget o1",
        "g2:memory-timeline o1",
    ] {
        let refused = ask(&home, "family", cmd);
        assert!(refused.contains("not allowed"), "{cmd}: {refused}");
        assert!(!refused.contains("pier 7"), "{cmd}: {refused}");
    }
    let logged: i64 = home
        .store()
        .read_blocking(|c| {
            c.query_row(
                "SELECT count(*) FROM ipc_log WHERE group_folder = 'family' AND outcome = 'refused'
                   AND action IN ('memory_get', 'forget', 'memory_timeline')",
                (),
                |r| r.get(0),
            )
        })
        .unwrap();
    assert_eq!(logged, 3);
    assert!(ask(&home, "main", "g2:memory-get o1").contains("active"));

    // What people keep for every group (`global`) every agent finds and
    // reads, and none may forget.
    let kept = home.ok(&[
        "memory",
        "remember",
        "global",
        "the family doctor is Dr. Lee",
    ]);
    let gid = kept.trim().rsplit(' ').next().unwrap().to_string();
    let found = ask(&home, "family", "g2:memory-search who is our doctor");
    assert!(
        found.contains(&format!("o{gid} fact")) && found.contains("Dr. Lee"),
        "{found}"
    );
    let got = ask(&home, "family", &format!("g2:memory-get o{gid}"));
    assert!(got.contains("Dr. Lee"), "{got}");
    let refused = ask(&home, "family", &format!("g2:memory-forget o{gid}"));
    assert!(refused.contains("not allowed"), "{refused}");
    let global = home.json(&["memory", "observations", "global"]);
    assert_eq!(global[0]["status"], "active", "{global}");

    // Its own group forgets it: gone from search.
    assert!(ask(&home, "main", "g2:memory-forget o1").contains("Forgot o1"));
    let after = ask(&home, "main", "g2:memory-search where is the boat");
    assert!(!after.contains("o1 fact"), "{after}");
}
