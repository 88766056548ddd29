//! What memory gives back: what people asked to keep is recalled first
//! until forgotten, memory outlives a clear and comes with related prompts
//! only, and the agents' memory tools reach their own group only.

use super::*;

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

/// `g2 serve` with a quick memory processor on a fresh home, where Ann
/// asked the agent of `main` to remember where the boat is, and it
/// answered; `None` without the agent image.
async fn ann_asks_to_remember_the_boat() -> Option<(TestHome, Serve, Chat)> {
    if !image_ready() {
        return None;
    }
    let home = TestHome::new();
    let s = serve(&home, &[("G2_MEMORY__PROCESS_INTERVAL_SECS", "1")]);
    let mut main = Chat::open(&s.url, "main").await;
    main.say("Ann", "remember that the boat is moored at pier 7")
        .await;
    Some((home, s, main))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_people_ask_to_remember_is_recalled_first_until_forgotten() {
    let Some((home, s, mut main)) = ann_asks_to_remember_the_boat().await else {
        return;
    };
    post(&s.url, "main", "Bob", "we always buy bread on Fridays").await;
    main.reply(60).await;
    // The processor extracts each completed prompt in the background.
    let base = format!("{}/api/groups/main/memory", s.url);
    let list = json_until(&format!("{base}/observations"), |v| {
        v.as_array().is_some_and(|a| a.len() >= 2)
    })
    .await;
    let boat = item(&list, "title", "the boat is moored at pier 7");
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
    main.say("Bob", "g2:clear Boat").await;
    let shown = main
        .say("Bob", "where is the boat moored?\ng2:context")
        .await;
    let at_start = session_blocks(&shown);
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

/// The blocks of `shown` that are not a prompt's (the session's), in
/// whatever order the request held them.
fn session_blocks(shown: &str) -> String {
    shown
        .split("<g2-memory>")
        .skip(1)
        .map(|b| b.split("</g2-memory>").next().unwrap_or(""))
        .filter(|b| !b.contains(PROMPT_BLOCK))
        .collect::<Vec<_>>()
        .join("\n")
}

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
    let Some((home, s, mut main)) = ann_asks_to_remember_the_boat().await else {
        return;
    };
    let base = format!("{}/api/groups/main/memory", s.url);
    json_until(&format!("{base}/observations"), |v| {
        v.as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    // Bob clears the session: a new one starts with the group's memory.
    let cleared = main.say("Bob", "g2:clear Boat").await;
    assert!(cleared.contains("bookmarked"), "{cleared}");
    let shown = main.say("Bob", "g2:context").await;
    assert!(shown.contains("<g2-memory>"), "{shown}");
    assert!(shown.contains("the boat is moored at pier 7"), "{shown}");
    // A related question brings its memory with it; an unrelated one none.
    let related = main
        .say("Bob", "where is the boat moored?\ng2:context")
        .await;
    assert!(related.contains(PROMPT_BLOCK), "{related}");
    // The model was given the block; Claude Code's transcript keeps the
    // placeholder the gateway filled (the block is made while Claude Code
    // works on the prompt).
    let projects = home
        .path()
        .join("data/sessions/main/.claude/projects/-workspace-group");
    let prompts: Vec<String> = std::fs::read_dir(&projects)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter(|v| v["type"] == "user")
        .map(|v| v["message"]["content"].to_string())
        .collect();
    assert!(
        prompts.iter().any(|p| p.contains("<g2-memory ref=\\\""))
            && !prompts.iter().any(|p| p.contains(PROMPT_BLOCK)),
        "{prompts:#?}"
    );
    let unrelated = main
        .say("Bob", "what is the capital of France?\ng2:context")
        .await;
    // Only this request's blocks are shown: the related prompt's own, and
    // none for the unrelated one (the earlier block in the history is not
    // this request's).
    assert_eq!(related.matches(PROMPT_BLOCK).count(), 1, "{related}");
    assert_eq!(
        unrelated.matches(PROMPT_BLOCK).count(),
        0,
        "no block for an unrelated prompt: {unrelated}"
    );
    // Turned off for the group: a new session starts without memory.
    home.ok(&["groups", "inject", "main", "off"]);
    main.say("Bob", "g2:clear Quiet").await;
    let off = main.say("Bob", "g2:context").await;
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
