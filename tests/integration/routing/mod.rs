//! `g2 serve` end to end on a real port, with real Docker, the real Claude
//! Code in the agent image and the offline model: messages routed to warm
//! containers, trigger rules, the session tools, refused cross-group
//! requests, scheduled tasks, retries, the queue's global limit, a killed
//! host, graceful shutdown, and `g2 chat`.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

fn status(base: &str, folder: &str) -> impl Future<Output = Value> {
    let url = format!("{base}/api/groups/{folder}/status");
    async move { get_json(&url).await }
}

async fn session_of(base: &str, folder: &str) -> Option<String> {
    status(base, folder).await["session"]["session_id"]
        .as_str()
        .map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_answered_by_one_warm_container_per_group() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", None).await;

    post(&s.url, "main", "ann", "hello there").await;
    let r = main.reply(120).await;
    assert_eq!(r, "Offline model (g2) received: \"hello there\"");
    let first = containers_of(&home);
    assert_eq!(first.len(), 1, "{first:?}");

    // Same container: the second message is a follow-up in its input/.
    post(&s.url, "main", "ann", "second one").await;
    assert_eq!(
        main.reply(60).await,
        "Offline model (g2) received: \"second one\""
    );
    assert_eq!(
        containers_of(&home),
        first,
        "answered by the same container"
    );
    let sid = session_of(&s.url, "main").await.expect("a session");

    // The agent's internal notes never leave the host.
    post(
        &s.url,
        "main",
        "ann",
        "visible <internal>secret plan</internal> end",
    )
    .await;
    let r = main.reply(60).await;
    assert!(
        r.contains("visible")
            && r.contains("end")
            && !r.contains("secret")
            && !r.contains("internal"),
        "{r}"
    );
    assert_eq!(
        session_of(&s.url, "main").await.as_deref(),
        Some(sid.as_str())
    );

    // A group that needs a trigger: plain messages wait and go along as context.
    let mut fam = Sse::open(&s.url, "family", None).await;
    post(&s.url, "family", "bob", "we need milk").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(bot_messages(&s.url, "family").await.is_empty());
    assert!(
        status(&s.url, "family").await["container"].is_null(),
        "no container without a trigger"
    );
    post(&s.url, "family", "cy", "@G2 what do we need?").await;
    let r = fam.reply(120).await;
    assert!(
        r.contains("we need milk") && r.contains("@G2 what do we need?"),
        "{r}"
    );
    // One container per group, both up.
    assert_eq!(containers_of(&home).len(), 2);
    // The bot's own messages are not routed back: nothing more comes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(bot_messages(&s.url, "family").await.len(), 1);
    assert_eq!(bot_messages(&s.url, "main").await.len(), 3);
    let st = status(&s.url, "main").await;
    assert_eq!(
        st["cursor"].as_i64(),
        main.seen
            .iter()
            .filter(|m| m["from_bot"] == false)
            .map(|m| m["seq"].as_i64().unwrap())
            .max()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_session_tools_over_http() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", None).await;
    post(
        &s.url,
        "main",
        "ann",
        "Please research deductions for the home office",
    )
    .await;
    main.reply(120).await;
    let old = session_of(&s.url, "main").await.expect("a session");

    post(&s.url, "main", "ann", "g2:clear Tax research").await;
    let r = main.reply(90).await;
    assert!(r.contains("Cleared") && r.contains("Tax research"), "{r}");
    let date = chrono::Utc::now().format("%Y-%m-%d");
    let archive = home
        .path()
        .join(format!("groups/main/conversations/{date}-tax-research.md"));
    let md =
        std::fs::read_to_string(&archive).unwrap_or_else(|e| panic!("{}: {e}", archive.display()));
    assert!(md.contains("deductions for the home office"), "{md}");
    let history = get_json(&format!("{}/api/groups/main/sessions", s.url)).await;
    assert_eq!(history[0]["name"], "Tax research");
    assert_eq!(history[0]["session_id"], old.as_str());
    assert_eq!(
        session_of(&s.url, "main").await,
        None,
        "the pointer is gone (and stays gone)"
    );

    post(&s.url, "main", "ann", "Something else entirely").await;
    main.reply(120).await;
    let new = session_of(&s.url, "main").await.expect("a new session");
    assert_ne!(new, old);

    post(&s.url, "main", "ann", "g2:sessions").await;
    let r = main.reply(90).await;
    assert!(r.contains("Tax research"), "{r}");
    post(&s.url, "main", "ann", "g2:search deductions").await;
    let r = main.reply(90).await;
    assert!(r.contains("tax-research"), "{r}");

    let id = history[0]["id"].as_i64().unwrap();
    post(
        &s.url,
        "main",
        "ann",
        &format!("g2:resume {id} Something new"),
    )
    .await;
    let r = main.reply(90).await;
    assert!(r.contains("Resumed"), "{r}");
    assert_eq!(
        session_of(&s.url, "main").await.as_deref(),
        Some(old.as_str())
    );
    // The next message runs in the resumed session.
    post(&s.url, "main", "ann", "where were we?").await;
    main.reply(120).await;
    assert_eq!(
        session_of(&s.url, "main").await.as_deref(),
        Some(old.as_str())
    );
    let history = get_json(&format!("{}/api/groups/main/sessions", s.url)).await;
    assert!(
        history
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["name"] == "Something new" && h["session_id"] == new.as_str()),
        "{history}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_cannot_reach_into_another_group() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let s = serve(&home, &[]);
    let mut fam = Sse::open(&s.url, "family", None).await;
    post(
        &s.url,
        "family",
        "bob",
        "g2:send-to local:main hello main\ng2:schedule-for main once 2030-01-01T00:00:00Z sneaky\ng2:register evil Evil\ng2:send hi family\n\
         g2:bash cd /workspace/ipc/tasks && printf '{\"requestId\":\"forged\",\"type\":\"clear_session\",\"name\":\"x\",\"groupFolder\":\"main\"}' > .f && mv .f forged.json",
    )
    .await;
    // The agent's own send_message arrives first, then its reply.
    let sent = fam
        .until(120, |m| m["from_bot"] == true && m["text"] == "hi family")
        .await;
    assert_eq!(sent["sender"], "G2");
    let r = fam.reply(90).await;
    assert_eq!(r.matches("not allowed").count(), 3, "{r}");

    // The forged request (written by the agent's own Bash) is served by the
    // watcher on its own time.
    let url = format!("{}/api/groups/family/ipc-log", s.url);
    let deadline = Instant::now() + Duration::from_secs(15);
    let log = loop {
        let log = get_json(&url).await;
        if log.as_array().unwrap().len() >= 5 || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let outcomes: Vec<(String, String)> = log
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|l| {
            (
                l["action"].as_str().unwrap().into(),
                l["outcome"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("send_message", "refused"),
            ("schedule_task", "refused"),
            ("register_group", "refused"),
            ("send_message", "ok"),
            ("clear_session", "refused")
        ]
        .map(|(a, o)| (a.to_string(), o.to_string()))
    );
    assert!(
        get_json(&format!("{}/api/groups/main/messages", s.url))
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        get_json(&format!("{}/api/groups/main/tasks", s.url))
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        get_json(&format!("{}/api/groups/main/sessions", s.url))
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        log[0]["detail"].as_str().unwrap().contains("never on main"),
        "{log}"
    );
    let groups = get_json(&format!("{}/api/groups", s.url)).await;
    assert_eq!(groups.as_array().unwrap().len(), 2, "{groups}");
    assert!(
        std::fs::read_to_string(home.path().join("serve.log"))
            .unwrap()
            .contains("agent request refused")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_tasks_fire_and_report_to_the_chat() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", None).await;
    let at = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    post(
        &s.url,
        "main",
        "ann",
        &format!("g2:schedule once {at} Water the plants"),
    )
    .await;
    let r = main.reply(120).await;
    assert!(r.contains("Scheduled task"), "{r}");
    // The warm container is idle: the task must not wait behind it.
    let fired = main
        .until(120, |m| {
            m["from_bot"] == true && m["text"].as_str().unwrap().contains("Water the plants")
        })
        .await;
    assert!(
        fired["text"]
            .as_str()
            .unwrap()
            .starts_with("Offline model (g2) received"),
        "{fired}"
    );
    let tasks = get_json(&format!("{}/api/groups/main/tasks", s.url)).await;
    assert_eq!(tasks[0]["status"], "completed", "{tasks}");
    let detail = get_json(&format!(
        "{}/api/tasks/{}",
        s.url,
        tasks[0]["id"].as_str().unwrap()
    ))
    .await;
    assert_eq!(detail["runs"].as_array().unwrap().len(), 1);
    assert_eq!(detail["runs"][0]["status"], "success");

    post(
        &s.url,
        "main",
        "ann",
        "g2:schedule interval 2000 Check the mail",
    )
    .await;
    main.reply(120).await;
    for _ in 0..2 {
        main.until(120, |m| {
            m["from_bot"] == true && m["text"].as_str().unwrap().contains("Check the mail")
        })
        .await;
    }
    let tasks = get_json(&format!("{}/api/groups/main/tasks", s.url)).await;
    let id = tasks
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["schedule_type"] == "interval")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = http_client()
        .post(format!("{}/api/tasks/{id}/cancel", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let detail = get_json(&format!("{}/api/tasks/{id}", s.url)).await;
    assert!(detail["runs"].as_array().unwrap().len() >= 2, "{detail}");
    assert_eq!(detail["task"]["status"], "cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_mid_turn_answers_exactly_once() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let mut s = serve(&home, &[]);
    let seq = post(
        &s.url,
        "main",
        "ann",
        "g2:bash timeout 8 tail -f /dev/null; echo slow-done",
    )
    .await;
    // Mid-turn: the container is up and the model has asked for the tool.
    wait_for_container(&home);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        bot_messages(&s.url, "main").await.is_empty(),
        "still in the turn"
    );
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();

    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", Some(0)).await;
    let r = main.reply(180).await;
    assert!(r.contains("slow-done"), "{r}");
    let replies = bot_messages(&s.url, "main").await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert!(replies[0]["seq"].as_i64().unwrap() > seq);
    // Killed again after the reply: nothing is answered twice.
    drop(main);
    let mut s = s;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let s = serve(&home, &[]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(bot_messages(&s.url, "main").await.len(), 1);
    assert!(
        get_json(&format!("{}/api/queue", s.url)).await["running"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_retried_then_the_sender_is_told() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(
        &home,
        &[
            ("G2_CONTAINER__IMAGE", "g2-agent:missing"),
            ("G2_QUEUE__RETRIES", "2"),
            ("G2_QUEUE__RETRY_BASE_MS", "200"),
            ("G2_LOG_FORMAT", "json"),
        ],
    );
    let mut main = Sse::open(&s.url, "main", None).await;
    let t0 = Instant::now();
    post(&s.url, "main", "ann", "anyone there?").await;
    let r = main.reply(60).await;
    assert!(
        r.starts_with("@ann sorry, I could not answer after 3 tries"),
        "{r}"
    );
    // Two retries, 200 ms then 400 ms apart.
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    let st = status(&s.url, "main").await;
    assert!(
        st["failing"]["error"]
            .as_str()
            .unwrap()
            .contains("g2-agent:missing"),
        "{st}"
    );
    // Nothing is retried forever.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(bot_messages(&s.url, "main").await.len(), 1);
    // Structured logs: one JSON object a line, with the decision's fields.
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    let gave_up: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["fields"]["message"] == "giving up; the group is marked failing")
        .unwrap_or_else(|| panic!("{log}"));
    assert_eq!(
        (
            gave_up["level"].as_str(),
            gave_up["fields"]["group"].as_str(),
            gave_up["fields"]["tries"].as_u64()
        ),
        (Some("ERROR"), Some("main"), Some(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_limit_queues_groups_and_idle_containers_give_way() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&[
        "groups",
        "add",
        "family",
        "--name",
        "Family",
        "--no-trigger",
    ]);
    let s = serve(&home, &[("G2_QUEUE__MAX_CONTAINERS", "1")]);
    let mut main = Sse::open(&s.url, "main", None).await;
    let mut fam = Sse::open(&s.url, "family", None).await;
    post(&s.url, "main", "ann", "first").await;
    main.reply(120).await;
    // Main's container is warm and idle; family must not wait 30 minutes.
    post(&s.url, "family", "bob", "second").await;
    assert!(fam.reply(120).await.contains("second"));
    let q = get_json(&format!("{}/api/queue", s.url)).await;
    let running: Vec<&str> = q["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert_eq!(running, ["family"], "{q}");
    assert_eq!(containers_of(&home).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_from_a_terminal_and_a_graceful_shutdown() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    let mut chat = home
        .command(&["chat", "main", "--url", &s.url, "--sender", "dana"], &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    writeln!(stdin, "hello from a terminal").unwrap();
    let mut lines = BufReader::new(chat.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    assert_eq!(
        line,
        "G2: Offline model (g2) received: \"hello from a terminal\""
    );
    drop(stdin);
    assert!(chat.wait().unwrap().success());
    let all = get_json(&format!("{}/api/groups/main/messages", s.url)).await;
    assert_eq!(all[0]["sender"], "dana");

    // A chat with an unknown group, or no server, is a clear error.
    let out = home.g2_with(&["chat", "nobody", "--url", &s.url], &[]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("404"));
    let out = home.g2_with(&["chat", "main", "--url", "http://127.0.0.1:9"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not answer"));

    // SIGTERM with a warm container and an open stream: the container is
    // closed, the host exits cleanly.
    assert_eq!(containers_of(&home).len(), 1);
    let _open = Sse::open(&s.url, "main", None).await;
    let mut s = s;
    let pid = s.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let t0 = Instant::now();
    let code = s.child.wait().unwrap();
    assert!(code.success(), "{code:?}");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert!(containers_of(&home).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ipc_watcher_serves_every_group_folder() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    // Left by an earlier host: served at start.
    let req = |id: &str, body: &str| format!(r#"{{"requestId":"{id}",{body}}}"#);
    let main_msgs = home.path().join("data/ipc/main/messages");
    g2_core::ipc::write_atomic(
        &main_msgs,
        "old.json",
        req("old", r#""type":"send_message","text":"left over""#).as_bytes(),
    )
    .unwrap();
    let s = serve(&home, &[]);
    let mut main = Sse::open(&s.url, "main", Some(0)).await;
    assert_eq!(main.reply(15).await, "left over");
    // Written while no container runs: inotify, not a run's watch.
    g2_core::ipc::write_atomic(
        &main_msgs,
        "new.json",
        req("new", r#""type":"send_message","text":"by file""#).as_bytes(),
    )
    .unwrap();
    assert_eq!(main.reply(5).await, "by file");
    // A group registered after start is watched too.
    let r = http_client()
        .post(format!("{}/api/groups", s.url))
        .json(&serde_json::json!({ "folder": "later", "name": "Later" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let tasks = home.path().join("data/ipc/later/tasks");
    std::fs::create_dir_all(&tasks).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    g2_core::ipc::write_atomic(
        &tasks,
        "t.json",
        req("t", r#""type":"list_tasks""#).as_bytes(),
    )
    .unwrap();
    let answer = home.path().join("data/ipc/later/responses/t.json");
    let deadline = Instant::now() + Duration::from_secs(12);
    while !answer.exists() {
        assert!(
            Instant::now() < deadline,
            "no answer for a group registered after start"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        std::fs::read_to_string(&answer)
            .unwrap()
            .contains("No scheduled tasks")
    );
    assert!(containers_of(&home).is_empty(), "no container was needed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_orphaned_by_a_killed_host_finishes_by_itself() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    // Host idle close after 3 s; the agent's own backstop 5 s later.
    let mut s = serve(&home, &[("G2_CONTAINER__IDLE_TIMEOUT_SECS", "3")]);
    let mut main = Sse::open(&s.url, "main", None).await;
    post(&s.url, "main", "ann", "hello").await;
    main.reply(120).await;
    s.child.kill().unwrap(); // before its idle close
    s.child.wait().unwrap();
    let name = containers_of(&home).pop().expect("the orphan");
    let running = || {
        let out = std::process::Command::new("docker")
            .args(["inspect", "-f", "{{.State.Running}}", &name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "true"
    };
    assert!(running(), "still up right after the kill");
    let deadline = Instant::now() + Duration::from_secs(40);
    while running() {
        assert!(
            Instant::now() < deadline,
            "the orphan did not finish by itself"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every routed prompt the group's agent was given, as Claude Code recorded
/// it in the group's transcripts (its user turns), oldest file first,
/// without the memory g2 injected beside it (recall may quote earlier
/// prompts).
fn recorded_prompts(home: &TestHome, folder: &str) -> Vec<String> {
    fn jsonl(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                jsonl(&p, out);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    jsonl(
        &home
            .path()
            .join(format!("data/sessions/{folder}/.claude/projects")),
        &mut files,
    );
    files.sort_by_key(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok());
    let mut prompts = Vec::new();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if v["type"] != "user" {
                continue;
            }
            let content = &v["message"]["content"];
            let texts: Vec<&str> = match content {
                Value::String(s) => vec![s.as_str()],
                Value::Array(blocks) => blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect(),
                _ => Vec::new(),
            };
            for t in texts {
                let t = without_memory(t);
                if t.contains("<messages>") {
                    prompts.push(t);
                }
            }
        }
    }
    prompts
}

/// `text` without its `<g2-memory>…</g2-memory>` blocks.
fn without_memory(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("<g2-memory>") {
        out.push_str(&rest[..i]);
        rest = rest[i..]
            .find("</g2-memory>")
            .map_or("", |j| &rest[i + j + "</g2-memory>".len()..]);
    }
    out.push_str(rest);
    out
}

/// How often `marker` is a whole message in `prompts`.
fn shown(prompts: &[String], marker: &str) -> usize {
    let tagged = format!(">{marker}</message>");
    prompts.iter().map(|p| p.matches(&tagged).count()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_pending_at_a_kill_is_answered_oldest_first_exactly_once() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let mut s = serve(&home, &[]);
    // The first turn waits at a gate the test opens once the host is back.
    post(
        &s.url,
        "main",
        "ann",
        "g2:bash while [ ! -e /workspace/group/gate ]; do sleep 0.2; done; echo gate-open",
    )
    .await;
    wait_for_container(&home);
    let mut last = 0;
    for i in 0..150 {
        last = post(&s.url, "main", "bob", &format!("backlog-{i:03}")).await;
    }
    assert!(
        bot_messages(&s.url, "main").await.is_empty(),
        "still in the turn"
    );
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();

    // The new host removed the old container before it listened.
    let s = serve(&home, &[]);
    std::fs::write(home.path().join("groups/main/gate"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while status(&s.url, "main").await["cursor"].as_i64() != Some(last) {
        assert!(
            Instant::now() < deadline,
            "the backlog was not answered: {}",
            status(&s.url, "main").await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Two prompts (100 messages, then 51), two answers, the gate's first.
    let replies = bot_texts(&s.url, "main").await;
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert!(replies[0].contains("gate-open"), "{replies:?}");
    let prompts = recorded_prompts(&home, "main");
    let backlog: Vec<&String> = prompts.iter().filter(|p| p.contains(">backlog-")).collect();
    assert_eq!(backlog.len(), 2, "{prompts:#?}");
    for i in 0..150 {
        let marker = format!("backlog-{i:03}");
        assert_eq!(shown(&prompts, &marker), 1, "{marker} in {prompts:#?}");
        // Oldest first: the first prompt holds the 99 oldest after the gate.
        let first = backlog[0].contains(&format!(">{marker}</message>"));
        assert_eq!(first, i < 99, "{marker}");
    }
    assert!(
        !prompts.iter().any(|p| p.contains("are not shown")),
        "nothing is passed over where every message wakes the agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_over_a_prompts_budget_is_passed_over_said_and_shown() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    let s = serve(&home, &[]);
    let mut chatter = Vec::new();
    for i in 0..120 {
        chatter.push(post(&s.url, "family", "bob", &format!("chatter-{i:03}")).await);
    }
    let mut fam = Sse::open(&s.url, "family", None).await;
    let call = post(&s.url, "family", "cy", "@G2 what did I miss?").await;
    let reply = fam.until(180, |m| m["from_bot"] == true).await;
    assert_eq!(reply["reply_to"].as_i64(), Some(call));

    // The agent was told what it was not shown: the 21 oldest.
    let prompts = recorded_prompts(&home, "family");
    assert!(
        prompts
            .iter()
            .any(|p| p.contains("[g2: 21 earlier messages of this chat, from ")),
        "the passed-over note in {prompts:#?}"
    );
    for i in 0..120 {
        let marker = format!("chatter-{i:03}");
        assert_eq!(shown(&prompts, &marker), usize::from(i >= 21), "{marker}");
    }
    // The log and the chat page say which were not shown.
    let log = get_json(&format!("{}/api/groups/family/messages?limit=1000", s.url)).await;
    let passed: Vec<i64> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["passed_over"] == true)
        .map(|m| m["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(passed, chatter[..21]);
    let page = get_text(&format!("{}/groups/family", s.url)).await;
    assert_eq!(page.matches("<li class=\"message passed\"").count(), 21);
    assert_eq!(page.matches(">not shown to the agent</span>").count(), 21);
    assert_eq!(
        status(&s.url, "family").await["cursor"].as_i64(),
        Some(call)
    );
}
