//! `g2 serve` end to end on a real port, with real Docker, the real Claude
//! Code in the agent image and the offline model: messages routed to warm
//! containers, trigger rules, the session tools, refused cross-group
//! requests, scheduled tasks, retries, the queue's global limit, a killed
//! host, graceful shutdown, and `g2 chat`.
//!
//! Here: routing, the tools, refusals, tasks, retries and the global limit;
//! `serving.rs`: `g2 chat`, the stop, the IPC watcher, orphans;
//! `backlog.rs`: backlogs and prompt budgets.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

mod backlog;
mod serving;

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

/// Kills the host `s` hard (SIGKILL) while `main`'s turn runs (nothing
/// answered yet) and starts a new one on `home`. `s` is kept: what the
/// killed host left is for the new one to find.
async fn killed_mid_turn(home: &TestHome, s: &mut Serve) -> Serve {
    assert!(
        bot_messages(&s.url, "main").await.is_empty(),
        "still in the turn"
    );
    s.child.kill().unwrap(); // SIGKILL
    s.child.wait().unwrap();
    serve(home, &[])
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
    let s = killed_mid_turn(&home, &mut s).await;
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
    let home = home_with_family();
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
