//! A backlog answered in order: what waited at a kill is answered oldest
//! first, exactly once; context over a prompt's budget is passed over,
//! said and shown.

use super::*;

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
            // A string content is one text; of blocks, the text ones count.
            let content = &v["message"]["content"];
            let blocks = content.as_array().into_iter().flatten();
            let texts = blocks
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str());
            for t in content.as_str().into_iter().chain(texts) {
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
    // The new host removes the old container before it listens.
    let s = killed_mid_turn(&home, &mut s).await;
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
