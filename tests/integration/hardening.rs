//! g2 against a hostile agent, with real Docker, the real Claude Code in the
//! agent image, the offline model and `g2 serve` on a real port: links the
//! agent plants in its writable trees, a turn that crashes its agent, and a
//! second `g2` on a home a host holds. Disk quotas are in `quota.rs`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// Every file under `dir` with its bytes (links as their target text).
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_symlink() {
                out.push((
                    e.path(),
                    std::fs::read_link(e.path())
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Whether any file under `dir` (not following links) holds `needle`.
fn holds(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    tree(dir)
        .into_iter()
        .filter(|(p, b)| {
            !std::fs::symlink_metadata(p)
                .unwrap()
                .file_type()
                .is_symlink()
                && b.windows(needle.len()).any(|w| w == needle)
        })
        .map(|(p, _)| p)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_an_agent_plants_are_never_followed() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    // Host folders and files the agent would like the host to use.
    let host = tempfile::tempdir().unwrap();
    let marker = format!("HOST-ONLY-{}", uuid::Uuid::new_v4());
    for d in [
        "tasks",
        "messages",
        "errors",
        "responses",
        "events",
        "input",
        "projects",
        "conversations",
    ] {
        std::fs::create_dir_all(host.path().join(d)).unwrap();
        std::fs::write(
            host.path().join(d).join("host.json"),
            format!(r#"{{"requestId":"h","type":"list_sessions","note":"{marker}"}}"#),
        )
        .unwrap();
    }
    std::fs::write(host.path().join("file.json"), format!("{{\"{marker}\":1}}")).unwrap();
    std::fs::create_dir_all(host.path().join("projects/-workspace-group")).unwrap();
    std::fs::write(
        host.path().join("projects/-workspace-group/x.jsonl"),
        format!("{{\"type\":\"user\",\"message\":{{\"content\":\"{marker}\"}}}}\n"),
    )
    .unwrap();
    let before = tree(host.path());
    let h = host.path().display().to_string();
    let script = [
        // The host remakes a watched folder as soon as it goes: try until
        // the link lands first.
        format!("cd /workspace/ipc && for d in tasks messages errors responses events input; do for i in 1 2 3 4 5 6 7 8 9 10; do mv $d .$d.$i; ln -s {h}/$d $d; [ -L $d ] && break; done; done"),
        format!("for f in current_tasks.json session_history.json available_groups.json; do rm -f $f; ln -s {h}/file.json $f; done"),
        format!("cd /home/node/.claude && mv projects .p.o && ln -s {h}/projects projects && rm -f settings.json && ln -s {h}/file.json settings.json"),
        format!("cd /workspace/group && mv conversations .c.o && ln -s {h}/conversations conversations && rm -f CLAUDE.md && ln -s {h}/file.json CLAUDE.md"),
        "echo planted".to_string(),
    ]
    .join(" && ");
    let s = serve(&home, &[("G2_CONTAINER__IDLE_TIMEOUT_SECS", "5")]);
    post(&s.url, "family", "eve", &format!("g2:bash {script}")).await;
    // Answered, or reported: whatever the agent's own sabotage did to it.
    let first = wait_bot(&s.url, "family", 1, 180).await;
    assert!(
        first[0].contains("planted") || first[0].contains("sorry"),
        "{first:?}"
    );
    // A second message: the host prepares the trees again (the run may
    // still be warm; then it is a follow-up the host writes into input/).
    post(&s.url, "family", "eve", "after the links").await;
    wait_bot(&s.url, "family", 2, 180).await;
    // A clear reads the transcript through .claude/projects.
    let r = http_client()
        .post(format!("{}/api/groups/family/session/clear", s.url))
        .json(&serde_json::json!({ "name": "after the links" }))
        .send()
        .await
        .unwrap();
    assert!(r.status() == 200 || r.status() == 404, "{}", r.status());
    drop(s);
    // A restart, and the group works.
    let s = serve(&home, &[]);
    post(&s.url, "family", "eve", "still there?").await;
    let texts = wait_bot(&s.url, "family", 3, 180).await;
    assert!(
        texts
            .iter()
            .any(|t| t == "Offline model (g2) received: \"still there?\""),
        "{texts:?}"
    );
    drop(s);

    assert_eq!(
        tree(host.path()),
        before,
        "host files unchanged; none created or deleted"
    );
    for tree_root in [
        "groups/family",
        "data/ipc/family",
        "data/sessions/family",
        "data/g2.db",
    ] {
        let p = home.path().join(tree_root);
        let found = if p.is_dir() {
            holds(&p, marker.as_bytes())
        } else {
            Vec::new()
        };
        assert!(
            found.is_empty(),
            "host content reached the group: {found:?}"
        );
    }
    let db = std::fs::read(home.path().join("data/g2.db")).unwrap();
    assert!(
        !db.windows(marker.len()).any(|w| w == marker.as_bytes()),
        "host content in the database"
    );
    // Every folder the host needs is a real folder again.
    for d in [
        "data/ipc/family/tasks",
        "data/ipc/family/input",
        "data/sessions/family/.claude/projects",
        "groups/family/conversations",
    ] {
        assert!(
            !std::fs::symlink_metadata(home.path().join(d))
                .unwrap()
                .file_type()
                .is_symlink(),
            "{d}"
        );
    }
    // Each attempt is recorded and logged: at least the folders and files
    // every later run, drain and clear must have met.
    let details: Vec<String> = home
        .store()
        .read_blocking(|c| {
            c.query_all(
                "SELECT detail FROM ipc_log WHERE group_folder = 'family' AND action = 'link' AND outcome = 'refused'",
                (),
                |r| r.get::<String>(0),
            )
        })
        .unwrap();
    for what in ["tasks/", "projects/", "settings.json", "conversations/"] {
        assert!(
            details.iter().any(|d| d.contains(what)),
            "{what} not recorded: {details:?}"
        );
    }
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(log.contains("a planted link or file was refused"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_turn_is_reported_once_and_never_rerun() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(
        &home,
        &[
            ("G2_QUEUE__RETRY_BASE_MS", "200"),
            ("G2_CONTAINER__PIDS", "128"),
        ],
    );
    // The agent's process killed mid-turn: reported with the reason, not re-run.
    post(
        &s.url,
        "main",
        "ann",
        "g2:bash echo ran >> /workspace/group/runs.txt; kill -9 $(pidof claude)",
    )
    .await;
    let t = wait_bot(&s.url, "main", 1, 180).await;
    assert!(
        t[0].starts_with("@ann sorry, I could not answer: the agent was killed")
            && t[0].contains("SIGKILL"),
        "{t:?}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(bot_texts(&s.url, "main").await.len(), 1, "answered once");
    assert_eq!(
        std::fs::read_to_string(home.path().join("groups/main/runs.txt")).unwrap(),
        "ran\n",
        "run once"
    );
    // The group goes on.
    post(&s.url, "main", "ann", "fine now?").await;
    assert_eq!(
        wait_bot(&s.url, "main", 2, 180).await[1],
        "Offline model (g2) received: \"fine now?\""
    );
    // A fork bomb: answered by the agent (its Bash reports what happened)
    // or, if it takes the agent down, reported with the reason; once.
    post(
        &s.url,
        "main",
        "ann",
        "g2:bash echo bomb >> /workspace/group/runs.txt; :(){ :|:& };:",
    )
    .await;
    let t = wait_bot(&s.url, "main", 3, 180).await;
    assert!(
        t[2].starts_with("g2:bash echo bomb")
            || t[2].contains("ran out of processes")
            || t[2].contains("the agent"),
        "{t:?}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(bot_texts(&s.url, "main").await.len(), 3, "answered once");
    assert_eq!(
        std::fs::read_to_string(home.path().join("groups/main/runs.txt")).unwrap(),
        "ran\nbomb\n",
        "run once"
    );
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(!log.contains("will retry"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_run_leaves_a_serving_hosts_containers_alone() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[]);
    post(&s.url, "main", "ann", "hello").await;
    wait_bot(&s.url, "main", 1, 180).await;
    let warm = containers_of(&home);
    assert_eq!(warm.len(), 1, "a warm container");
    let out = home.g2(&["run", "main", "hi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("g2 serve (pid")
            && err.contains("Nothing was run and no container was touched")
            && err.contains(&s.url),
        "{err}"
    );
    assert_eq!(
        containers_of(&home),
        warm,
        "the host's container still runs"
    );
    let st: Value = get_json(&format!("{}/api/queue", s.url)).await;
    assert_eq!(st["running"].as_array().unwrap().len(), 1, "{st}");
    // A second host is refused the same way.
    let second = home.g2(&["serve", "--listen", "127.0.0.1:0"]);
    assert!(
        !second.status.success()
            && String::from_utf8_lossy(&second.stderr).contains("one host per home")
    );
    assert_eq!(containers_of(&home), warm);
    drop(s);
    // Once the host is gone, g2 run works (and removes what is left).
    let out = home.g2(&["run", "main", "after the host"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Files and process environments in a running container that hold any of
/// `needles` (`docker exec`: the needles are in the exec'd commands'
/// arguments, never in a file or an environment, and `/proc`, `/sys` and
/// `/dev` are left out of the file search).
fn found_in_container(container: &str, needles: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for n in needles {
        let script = format!(
            "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o \\( -type f -o -type l \\) -print0 2>/dev/null \
               | xargs -0 grep -lF -e '{n}' 2>/dev/null; \
             for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e 2>/dev/null | grep -qF -e '{n}' && echo \"$e\"; done; true"
        );
        let out = std::process::Command::new("docker")
            .args(["exec", container, "/bin/sh", "-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        hits.extend(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| format!("{l} holds {}…", &n[..8])),
        );
        let inspect = std::process::Command::new("docker")
            .args(["inspect", "--format", "{{json .Config.Env}}", container])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&inspect.stdout).contains(n) {
            hits.push(format!(
                "the container's configured environment holds {}…",
                &n[..8]
            ));
        }
    }
    hits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_is_visible_in_any_container() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let api_token = format!("tok-{id}");
    let model_key = format!("sk-ant-api03-{id}");
    let bot_token = format!("123456789:AA{id}");
    let auth_token = format!("auth-{id}");
    std::fs::write(
        home.path().join("g2.toml"),
        format!("[api]\ntoken = \"{api_token}\"\n"),
    )
    .unwrap();
    let s = serve(
        &home,
        &[
            ("G2_PROVIDER", "offline"),
            ("ANTHROPIC_API_KEY", &model_key),
            ("G2_CONTAINER__IDLE_TIMEOUT_SECS", "300"),
        ],
    );
    let http = http_client();
    let ask = |folder: &'static str, text: String, n: usize| {
        let (http, url, token) = (http.clone(), s.url.clone(), api_token.clone());
        async move {
            shared::post_message(&http, &url, Some(&token), folder, ("ann", &text)).await;
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                let all = shared::json_of(
                    http.get(format!("{url}/api/groups/{folder}/messages?limit=1000"))
                        .bearer_auth(&token),
                )
                .await;
                let bot: Vec<String> = all
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["from_bot"] == true)
                    .map(|m| m["text"].as_str().unwrap().to_string())
                    .collect();
                if bot.len() > n {
                    return bot[n].clone();
                }
                assert!(Instant::now() < deadline, "{folder}: no answer {n}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let cat = "cat /workspace/project/g2.toml /workspace/project/.env /workspace/project/data/g2.db 2>&1; ls -A /workspace/project; echo cat-done";
    let first = ask("main", format!("g2:bash {cat}"), 0).await;
    assert!(first.contains("cat-done"), "{first}");
    // The .env is written once main's container runs: it must not show either.
    std::fs::write(
        home.path().join(".env"),
        format!("TELEGRAM_BOT_TOKEN={bot_token}\nANTHROPIC_AUTH_TOKEN={auth_token}\n"),
    )
    .unwrap();
    let second = ask("main", format!("g2:bash {cat}"), 1).await;
    for reply in [&first, &second] {
        let out = reply
            .rsplit_once("echo cat-done: ")
            .map_or(reply.as_str(), |r| r.1);
        for gone in ["g2.toml", ".env", "data/g2.db"] {
            assert!(
                out.contains(&format!(
                    "can't open '/workspace/project/{gone}': No such file or directory"
                )),
                "{gone}: {out}"
            );
        }
        let listed: Vec<&str> = out.lines().collect();
        assert!(
            listed.contains(&"groups"),
            "main still sees the groups: {out}"
        );
        for hidden in ["g2.toml", ".env", "data"] {
            assert!(!listed.contains(&hidden), "{hidden} listed: {out}");
        }
    }
    ask("family", "hello".into(), 0).await;
    let needles = [
        api_token.as_str(),
        model_key.as_str(),
        bot_token.as_str(),
        auth_token.as_str(),
    ];
    let running = containers_of(&home);
    assert_eq!(
        running.len(),
        2,
        "main's and family's containers are warm: {running:?}"
    );
    for c in &running {
        assert_eq!(found_in_container(c, &needles), Vec::<String>::new(), "{c}");
    }
    // The search itself would find one: a file the group wrote holding it.
    std::fs::write(home.path().join("groups/family/planted.txt"), &bot_token).unwrap();
    let family = running.iter().find(|c| c.contains("family")).unwrap();
    assert_eq!(found_in_container(family, &needles).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_replaces_its_input_folder_leaves_and_the_next_message_is_answered() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    // Warm containers would wait 10 minutes for follow-ups.
    let s = serve(&home, &[("G2_CONTAINER__IDLE_TIMEOUT_SECS", "600")]);
    post(&s.url, "family", "ann", "hello").await;
    wait_bot(&s.url, "family", 1, 180).await;
    let first = containers_of(&home);
    assert_eq!(first.len(), 1, "warm: {first:?}");
    // The agent moves its own input folder away and links another in its
    // place; the host remakes it for the next message.
    post(
        &s.url,
        "family",
        "ann",
        "g2:bash cd /workspace/ipc && mv input input.old && ln -s /tmp input && echo swapped",
    )
    .await;
    let t = wait_bot(&s.url, "family", 2, 180).await;
    assert!(t[1].contains("swapped"), "{t:?}");
    post(&s.url, "family", "ann", "are you still there?").await;
    let started = Instant::now();
    let t = wait_bot(&s.url, "family", 3, 90).await;
    assert_eq!(
        t[2], "Offline model (g2) received: \"are you still there?\"",
        "{t:?}"
    );
    // Answered by a fresh container, long before any idle timeout.
    assert!(started.elapsed() < Duration::from_secs(60));
    let now = containers_of(&home);
    assert!(!now.iter().any(|c| first.contains(c)), "{first:?} {now:?}");
    let log = std::fs::read_to_string(home.path().join("serve.log")).unwrap();
    assert!(
        log.contains("input/ was replaced; made a folder again"),
        "{log}"
    );
}
