//! Agent containers end to end: the real Docker engine, the agent image
//! built by `g2 image build`, the real Claude Code inside it, the offline
//! model behind the group's gateway socket.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

fn run(home: &TestHome, folder: &str, prompt: &str, env: &[(&str, &str)]) -> Value {
    let out = home.g2_with(&["run", folder, prompt, "--json"], env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "g2 run {prompt:?}: {e}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn run_replies_resumes_and_leaves_nothing_behind() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let first = run(&home, "main", "hello from g2 run", &[]);
    assert_eq!(
        first["replies"][0], "Offline model (g2) received: \"hello from g2 run\"",
        "{first}"
    );
    let sid = first["session_id"].as_str().unwrap().to_string();
    assert_eq!(
        home.json(&["sessions", "show", "main"])["session_id"],
        sid.as_str()
    );

    let second = run(&home, "main", "and again", &[]);
    assert_eq!(
        second["replies"][0],
        "Offline model (g2) received: \"and again\""
    );
    assert_eq!(
        second["session_id"],
        sid.as_str(),
        "the second run must resume the session"
    );
    assert_eq!(
        home.json(&["sessions", "show", "main"])["session_id"],
        sid.as_str()
    );
    assert_ne!(first["container"], second["container"]);
    assert!(
        containers_of(&home).is_empty(),
        "a container outlived its run"
    );

    // The transcript lives in the group's .claude state on the host.
    assert!(
        home.path()
            .join(format!(
                "data/sessions/main/.claude/projects/-workspace-group/{sid}.jsonl"
            ))
            .is_file()
    );
    // Requests were accounted to the group's socket.
    let usage = home.json(&["usage"]);
    assert!(
        usage
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["group"] == "main" && r["requests"].as_u64().unwrap() >= 2),
        "{usage}"
    );

    // A session Claude Code does not know is cleared and the prompt retried once, fresh.
    home.ok(&[
        "sessions",
        "set",
        "main",
        "0b9c3f6e-1c1d-4d0e-9a35-6c1b6d7e8f90",
    ]);
    let stale = run(&home, "main", "after a stale pointer", &[]);
    assert_eq!(stale["retried_fresh"], true, "{stale}");
    assert_eq!(
        stale["replies"][0],
        "Offline model (g2) received: \"after a stale pointer\""
    );
    let fresh = stale["session_id"].as_str().unwrap();
    assert_ne!(fresh, "0b9c3f6e-1c1d-4d0e-9a35-6c1b6d7e8f90");
    assert_eq!(
        home.json(&["sessions", "show", "main"])["session_id"],
        fresh
    );
}

#[test]
fn follow_ups_go_to_the_running_container() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let child = home
        .command(
            &["run", "main", "g2:bash sleep 3; echo slept", "--json"],
            &[],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name = wait_for_container(&home);
    // While the first turn runs, a follow-up arrives.
    std::thread::sleep(Duration::from_millis(500));
    g2_host::agent::send_follow_up(&home.home(), &gf("main"), "a follow-up mid-turn").unwrap();
    let out = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["container"], name.as_str());
    let replies: Vec<&str> = report["replies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        replies,
        [
            "g2:bash sleep 3; echo slept: slept",
            "Offline model (g2) received: \"a follow-up mid-turn\""
        ]
    );
    assert!(containers_of(&home).is_empty());
}

#[test]
fn agents_are_hardened_isolated_and_hold_no_key() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    home.ok(&["groups", "add", "family", "--name", "Family"]);
    home.ok(&["groups", "add", "work", "--name", "Work"]);
    std::fs::write(
        home.path().join("groups/work/private-plans.txt"),
        "work only",
    )
    .unwrap();
    let key = "sk-ant-api03-never-in-a-container";
    let env = [("ANTHROPIC_API_KEY", key), ("G2_PROVIDER", "offline")];

    // Inspect a running agent container.
    let mut child = home
        .command(&["run", "family", "g2:bash sleep 2"], &env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let name = wait_for_container(&home);
    assert!(name.starts_with("g2-family-"), "{name}");
    let out = Command::new("docker")
        .args(["inspect", &name])
        .output()
        .unwrap();
    let inspect: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &inspect[0];
    let hc = &c["HostConfig"];
    let (uid, gid) = g2_host::home::agent_ids();
    assert_eq!(c["Config"]["User"], format!("{uid}:{gid}"));
    assert_ne!(uid, 0);
    assert_eq!(hc["CapDrop"], serde_json::json!(["ALL"]));
    assert_eq!(hc["SecurityOpt"], serde_json::json!(["no-new-privileges"]));
    assert_eq!(hc["ReadonlyRootfs"], true);
    assert_eq!(hc["NetworkMode"], "none");
    assert!(hc["Tmpfs"]["/tmp"].is_string());
    assert!(
        hc["Memory"].as_i64().unwrap() > 0
            && hc["NanoCpus"].as_i64().unwrap() > 0
            && hc["PidsLimit"].as_i64().unwrap() > 0
    );
    assert_eq!(c["Config"]["Labels"]["g2.group"], "family");
    assert!(c["Config"]["Labels"]["g2.run"].is_string());
    let env_text = c["Config"]["Env"].to_string();
    assert!(
        !env_text.contains(key),
        "the key is in the container's environment"
    );
    let mounts: Vec<(String, bool)> = c["Mounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["Destination"].as_str().unwrap().to_string(),
                m["RW"].as_bool().unwrap(),
            )
        })
        .collect();
    for want in [
        ("/workspace/group", true),
        ("/workspace/global", false),
        ("/workspace/ipc", true),
        ("/home/node/.claude", true),
    ] {
        assert!(
            mounts.iter().any(|(d, rw)| d == want.0 && *rw == want.1),
            "{want:?} in {mounts:?}"
        );
    }
    assert!(
        !mounts.iter().any(|(d, _)| d == "/workspace/project"),
        "only main sees the project"
    );
    assert!(child.wait().unwrap().success());

    // What the agent itself can see: no key, no other group, its own folder writable.
    let cmd = "cat /proc/self/environ | tr '\\0' '\\n'; env; find / -name 'private-*' 2>/dev/null; ls /workspace/project 2>&1; echo written > /workspace/group/note.txt; echo probe-done";
    let probe = run(&home, "family", &format!("g2:bash {cmd}"), &env);
    let reply = probe["replies"][0].as_str().unwrap();
    // Only what the command printed, not the command line echoed before it.
    let reply = reply
        .strip_prefix(&format!("g2:bash {cmd}: "))
        .unwrap_or_else(|| panic!("{reply}"));
    assert!(reply.contains("probe-done"), "{reply}");
    assert!(!reply.contains(key), "the agent saw the key: {reply}");
    assert!(
        !reply.contains("private-plans"),
        "the agent saw another group's folder: {reply}"
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("groups/family/note.txt")).unwrap(),
        "written\n"
    );
    // Only the main group learns about the other groups.
    let groups =
        std::fs::read_to_string(home.path().join("data/ipc/family/available_groups.json")).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&groups).unwrap(),
        serde_json::json!([])
    );
    assert!(containers_of(&home).is_empty());
}

#[test]
fn compaction_in_a_run_is_archived_and_searchable() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    run(&home, "main", "Plan the quarterly tax filing", &[]);
    let compact = run(&home, "main", "/compact", &[]);
    let archives = compact["archives"].as_array().unwrap();
    assert_eq!(archives.len(), 1, "{compact}");
    assert_eq!(archives[0]["trigger"], "precompact");
    let path = home.path().join(archives[0]["path"].as_str().unwrap());
    let md = std::fs::read_to_string(&path).unwrap();
    assert!(md.contains("Plan the quarterly tax filing"), "{md}");
    assert!(path.starts_with(home.path().join("groups/main/conversations")));
    let hits = home.json(&["search", "quarterly", "--group", "main"]);
    assert_eq!(hits[0]["path"], archives[0]["path"], "{hits}");
    // The hook left no event behind: the notice was taken in.
    let events = home.path().join("data/ipc/main/events");
    assert_eq!(std::fs::read_dir(&events).unwrap().count(), 0);
}

#[test]
fn killed_hosts_and_timeouts_leave_no_container() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    // A host killed mid-run leaves its container behind…
    let mut child = home
        .command(
            &[
                "run",
                "main",
                "g2:bash timeout 60 tail -f /dev/null; echo woke",
            ],
            &[],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let orphan = wait_for_container(&home);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(containers_of(&home), std::slice::from_ref(&orphan));
    // …and the next start removes it.
    let next = run(&home, "main", "after the crash", &[]);
    assert_eq!(
        next["replies"][0],
        "Offline model (g2) received: \"after the crash\""
    );
    assert!(
        containers_of(&home).is_empty(),
        "{:?}",
        containers_of(&home)
    );

    // A container over its hard timeout is stopped and removed.
    let started = Instant::now();
    let report = run(
        &home,
        "main",
        "g2:bash timeout 60 tail -f /dev/null; echo woke",
        &[
            ("G2_CONTAINER__TIMEOUT_SECS", "4"),
            ("G2_CONTAINER__STOP_GRACE_SECS", "1"),
        ],
    );
    assert_eq!(report["timed_out"], true, "{report}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert!(containers_of(&home).is_empty());
}

#[test]
fn the_agents_session_tools_clear_list_resume_and_search() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let first = run(
        &home,
        "main",
        "Let us look at the home office deductions",
        &[],
    );
    let old = first["session_id"].as_str().unwrap().to_string();

    // clear_session: archived under the name, bookmarked, pointer gone.
    let cleared = run(&home, "main", "g2:clear Tax research", &[]);
    let reply = cleared["replies"][0].as_str().unwrap();
    assert!(reply.contains("bookmarked as \"Tax research\""), "{reply}");
    let date = chrono::Local::now().format("%Y-%m-%d");
    let md = std::fs::read_to_string(
        home.path()
            .join(format!("groups/main/conversations/{date}-tax-research.md")),
    )
    .unwrap();
    assert!(md.contains("home office deductions"), "{md}");
    assert_eq!(
        home.json(&["sessions", "show", "main"])["session_id"],
        Value::Null,
        "the run must not write the old id back"
    );
    let history = home.json(&["sessions", "history", "main"]);
    assert_eq!(history[0]["name"], "Tax research");
    assert_eq!(history[0]["session_id"], old.as_str());

    // The next message starts a new session.
    let fresh = run(&home, "main", "something new", &[]);
    let new = fresh["session_id"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    // Snapshots written before that start.
    let snap = |name: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(home.path().join("data/ipc/main").join(name)).unwrap(),
        )
        .unwrap()
    };
    assert_eq!(snap("session_history.json")[0]["name"], "Tax research");
    assert_eq!(snap("available_groups.json")[0]["folder"], "main");
    assert_eq!(snap("current_tasks.json"), serde_json::json!([]));

    // list_sessions and search_sessions see the archive.
    let listed = run(&home, "main", "g2:sessions", &[]);
    assert!(
        listed["replies"][0]
            .as_str()
            .unwrap()
            .contains("#1 \"Tax research\""),
        "{listed}"
    );
    let found = run(&home, "main", "g2:search deductions", &[]);
    let text = found["replies"][0].as_str().unwrap();
    assert!(
        text.contains("Tax research") && text.contains("[deductions]"),
        "{text}"
    );
    assert!(
        text.contains(&format!("conversations/{date}-tax-research.md")),
        "{text}"
    );

    // resume_session brings the old session back and bookmarks the current one.
    let id = history[0]["id"].as_i64().unwrap();
    let resumed = run(&home, "main", &format!("g2:resume {id} Something new"), &[]);
    assert!(
        resumed["replies"][0]
            .as_str()
            .unwrap()
            .contains(&format!("Resumed session {old}")),
        "{resumed}"
    );
    assert_eq!(
        home.json(&["sessions", "show", "main"])["session_id"],
        old.as_str()
    );
    let back = run(&home, "main", "and we are back", &[]);
    assert_eq!(back["session_id"], old.as_str());
    let history = home.json(&["sessions", "history", "main"]);
    assert_eq!(history[0]["name"], "Something new");
    assert_eq!(history[0]["session_id"], new.as_str());
}
