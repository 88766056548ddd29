//! What a run leaves in memory: each prompt and tool call captured as it
//! comes, cleaned of what is private, consistent after a killed host, and
//! nothing at all when the group's capture is off.

use super::*;

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
    let second = run(&home, "note <private>my pin is 4417-QW</private> for later");
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
    // The pin carries letters no hex id holds (tool ids are random hex).
    for needle in ["4417-QW", key] {
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
    let mut main = Chat::open(&s.url, "main").await;
    main.say("ann", "g2:bash echo one").await;
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
