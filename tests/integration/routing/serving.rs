//! What `g2 serve` does around the queue: `g2 chat` from a terminal and a
//! graceful stop, the IPC watcher over every group folder, and an agent
//! that outlives a killed host.

use super::*;

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
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no group \"nobody\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = home.g2_with(&["chat", "main", "--url", "http://127.0.0.1:9"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("g2 serve is not running at"));

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
