//! Shared test helpers: temporary homes, running `g2`, fixture paths.

use g2_core::validate::GroupFolder;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use g2_host::config::Settings;
use g2_host::home::Home;
use g2_host::sessions::SessionManager;
use g2_host::store::Store;

#[path = "serve_process.rs"]
mod serve_process;

/// The project root (this file is in `tests/integration/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `tests/fixtures/transcripts` (or `G2_FIXTURES`).
pub fn fixtures_dir() -> PathBuf {
    let dir = std::env::var_os("G2_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("tests/fixtures/transcripts"));
    assert!(
        dir.is_dir(),
        "transcript fixtures not found at {} (set G2_FIXTURES)",
        dir.display()
    );
    dir
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A temporary home with `g2 init` done.
pub struct TestHome {
    /// A private folder holding the home (`home/`) and nothing else, so a
    /// test can check that nothing was created beside the home; removed
    /// when the home is dropped.
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl TestHome {
    pub fn new() -> Self {
        let h = Self::empty();
        h.ok(&["init"]);
        h
    }

    pub fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("home");
        std::fs::create_dir(&root).unwrap();
        Self { _dir: dir, root }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    pub fn g2(&self, args: &[&str]) -> Output {
        self.g2_with(args, &[])
    }

    /// `g2 --home <this home> ARGS` with only the given settings in its
    /// environment: the tests' own `G2_*` and `ANTHROPIC_*` variables must
    /// not leak in.
    pub fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_g2"));
        cmd.arg("--home").arg(self.path()).args(args);
        for (k, _) in std::env::vars() {
            if k.starts_with("G2_") || k.starts_with("ANTHROPIC_") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env.iter().copied());
        cmd
    }

    /// Runs g2 (see [`TestHome::command`]) to the end.
    pub fn g2_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().expect("running g2")
    }

    /// Runs g2 and requires success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.g2(args);
        assert!(
            out.status.success(),
            "g2 {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs g2 and requires failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.g2(args);
        assert!(
            !out.status.success(),
            "g2 {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut a = args.to_vec();
        a.push("--json");
        serde_json::from_str(&self.ok(&a)).expect("g2 --json prints JSON")
    }

    pub fn home(&self) -> Home {
        Home::new(self.path()).unwrap()
    }

    pub fn store(&self) -> Store {
        Store::open(&self.home().db_path(), Duration::from_secs(5)).unwrap()
    }

    pub fn sessions(&self) -> SessionManager {
        SessionManager::new(
            self.store(),
            self.home(),
            Settings::default().archive_options(&Default::default()),
        )
    }

    /// What agent requests reach, without a queue or scheduler.
    pub fn links(&self) -> g2_host::requests::Links {
        g2_host::requests::Links {
            channels: g2_host::channels::Channels::new(self.store()),
            assistant_name: "G2".into(),
            session_changed: None,
            tasks_changed: None,
            events_arrived: None,
        }
    }

    /// Puts a transcript where Claude Code would have written it for a
    /// group's session.
    pub fn place_transcript(&self, folder: &str, session_id: &str, from: &Path) -> PathBuf {
        let dest = self
            .home()
            .transcript_path(&gf(folder), session_id)
            .unwrap();
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(from, &dest).unwrap();
        dest
    }

    /// Files in a group's conversations folder, sorted.
    pub fn archives(&self, folder: &str) -> Vec<PathBuf> {
        let dir = self.home().conversations_dir(&gf(folder)).unwrap();
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| rd.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

// What the tests share with the benches.
#[path = "shared.rs"]
pub mod shared;

/// Writes a small transcript with the given user/assistant exchanges.
/// Archives one exchange as a transcript with `g2 archive` into `group`
/// under `name`.
pub fn archive_text(home: &TestHome, group: &str, name: &str, user: &str, assistant: &str) {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.jsonl");
    write_transcript(
        &t,
        "44444444-4444-4444-8444-444444444444",
        &[(user, assistant)],
    );
    home.ok(&shared::archive_args(&t, group, name));
}

pub fn write_transcript(path: &Path, session_id: &str, exchanges: &[(&str, &str)]) {
    let mut s = String::new();
    for (i, (user, assistant)) in exchanges.iter().enumerate() {
        s.push_str(
            &serde_json::json!({
                "type": "user", "uuid": format!("u{i}"), "sessionId": session_id,
                "message": {"role": "user", "content": user}
            })
            .to_string(),
        );
        s.push('\n');
        s.push_str(
            &serde_json::json!({
                "type": "assistant", "uuid": format!("a{i}"), "sessionId": session_id,
                "message": {"role": "assistant", "content": [{"type": "text", "text": assistant}]}
            })
            .to_string(),
        );
        s.push('\n');
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, s).unwrap();
}

/// Reads a started process's stdout (piped) line by line up to and
/// including the first line starting with `last`; fewer lines, without it,
/// when the process ends first.
pub fn lines_until(child: &mut Child, last: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("stdout piped"))
        .lines()
        .map_while(Result::ok)
    {
        let done = line.starts_with(last);
        lines.push(line);
        if done {
            break;
        }
    }
    lines
}

/// An HTTP client (with the TLS crypto provider the host uses installed).
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// An HTTP client that talks over a Unix socket.
pub fn socket_client(path: &Path) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .unix_socket(path)
        .build()
        .unwrap()
}

/// Whether a tool the test needs is there. In CI its absence fails the test;
/// elsewhere the test is skipped with a message saying what to run.
pub fn require(what: &str, present: bool) -> bool {
    if present {
        return true;
    }
    if in_ci() {
        panic!("{what} is required in CI but missing: scripts/setup.sh should have provided it");
    }
    eprintln!("skipping: {what} is missing (run scripts/setup.sh)");
    false
}

/// Builds the agent image once per test run; false when Docker or Claude
/// Code is missing outside CI (in CI that fails the test).
pub fn image_ready() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let docker = Command::new("docker")
        .args(["version", "--format", "{{.Server.APIVersion}}"])
        .output();
    if !require(
        "the Docker engine",
        docker.is_ok_and(|o| o.status.success()),
    ) {
        return false;
    }
    let home = TestHome::new();
    let claude = g2_host::doctor::find_claude(&home.home(), &Settings::default());
    if !require("Claude Code (tools/claude-code)", claude.is_some()) {
        return false;
    }
    let r = READY.get_or_init(|| {
        let out = home.g2(&["image", "build"]);
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = r {
        panic!("g2 image build failed: {e}");
    }
    true
}

/// Containers of a home, running or not.
pub fn containers_of(home: &TestHome) -> Vec<String> {
    docker_ps(home, &["-a"])
}

/// The home's running containers.
pub fn running_containers_of(home: &TestHome) -> Vec<String> {
    docker_ps(home, &[])
}

fn docker_ps(home: &TestHome, flags: &[&str]) -> Vec<String> {
    let label = format!(
        "label=g2.home={}",
        g2_host::container::home_label(home.path())
    );
    let out = Command::new("docker")
        .arg("ps")
        .args(flags)
        .args(["--filter", &label, "--format", "{{.Names}}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn wait_for_container(home: &TestHome) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(c) = containers_of(home).into_iter().next() {
            return c;
        }
        assert!(Instant::now() < deadline, "no container appeared");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running `g2 serve` on a free port; killed when dropped.
pub struct Serve {
    pub child: Child,
    pub url: String,
    home_label: String,
    log: PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        serve_process::stop(&mut self.child);
        // A failing test shows what the host said.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- the end of serve.log ---");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
        // Whatever a killed host left (tests kill it on purpose).
        let ids = Command::new("docker")
            .args([
                "ps",
                "-aq",
                "--filter",
                &format!("label=g2.home={}", self.home_label),
            ])
            .output();
        if let Ok(out) = ids {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
    }
}

/// Starts `g2 serve` on a free port; its log goes to `{home}/serve.log`
/// (appended, so restarts keep the earlier lines).
pub fn serve(home: &TestHome, env: &[(&str, &str)]) -> Serve {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(home.path().join("serve.log"))
        .unwrap();
    let mut env = env.to_vec();
    if !env.iter().any(|(k, _)| *k == "G2_LOG") {
        env.push(("G2_LOG", "g2_host=info,g2=info"));
    }
    // The suite asserts what memory is injected, not how fast: its 50 ms
    // default is missed on two cores busy with the other tests (the
    // question's embedding alone is 16 ms idle; docs/recall.md measures
    // the latency with a bench).
    if !env.iter().any(|(k, _)| *k == "G2_MEMORY__INJECT_WAIT_MS") {
        env.push(("G2_MEMORY__INJECT_WAIT_MS", "5000"));
    }
    let mut g2 = home.command(&[], &env);
    g2.stderr(log);
    let (child, url) = serve_process::spawn(g2);
    Serve {
        child,
        url,
        home_label: g2_host::container::home_label(home.path()),
        log: home.path().join("serve.log"),
    }
}

/// A reader of a chat's SSE stream: messages arrive on a channel.
pub struct Sse {
    rx: tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>,
    task: tokio::task::JoinHandle<()>,
    /// Everything read so far, in order.
    pub seen: Vec<serde_json::Value>,
}

impl Drop for Sse {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sse {
    /// Opens `{base}/api/groups/{folder}/stream?after=…` (live only without `after`).
    pub async fn open(base: &str, folder: &str, after: Option<i64>) -> Sse {
        use futures_util::StreamExt;
        let q = after.map(|a| format!("?after={a}")).unwrap_or_default();
        let resp = http_client()
            .get(format!("{base}/api/groups/{folder}/stream{q}"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
            while let Some(m) = messages.next().await {
                let _ = tx.send(serde_json::to_value(m).unwrap());
            }
        });
        Sse {
            rx,
            task,
            seen: Vec::new(),
        }
    }

    /// The next message matching `pred` within `secs`; panics with what
    /// was seen otherwise.
    pub async fn until(
        &mut self,
        secs: u64,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(m)) => {
                    self.seen.push(m.clone());
                    if pred(&m) {
                        return m;
                    }
                }
                _ => panic!(
                    "no matching message within {secs} s; seen: {:#?}",
                    self.seen
                ),
            }
        }
    }

    /// The next reply of the assistant.
    pub async fn reply(&mut self, secs: u64) -> String {
        let m = self.until(secs, |m| m["from_bot"] == true).await;
        m["text"].as_str().unwrap().to_string()
    }
}

/// Posts a message to a group's chat and waits (up to 120 s) for the
/// assistant's next reply there; the stream is opened first, so the reply
/// cannot be missed.
pub async fn ask(base: &str, folder: &str, sender: &str, text: &str) -> String {
    let mut chat = Sse::open(base, folder, None).await;
    post(base, folder, sender, text).await;
    chat.reply(120).await
}

/// Posts a message to a group's chat; returns its `seq`.
pub async fn post(base: &str, folder: &str, sender: &str, text: &str) -> i64 {
    let r = http_client()
        .post(format!("{base}/api/groups/{folder}/messages"))
        .json(&serde_json::json!({ "sender": sender, "text": text }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    r.json::<serde_json::Value>().await.unwrap()["seq"]
        .as_i64()
        .unwrap()
}

/// GET a JSON document.
/// The assistant's messages in a group's chat, oldest first.
pub async fn bot_messages(base: &str, folder: &str) -> Vec<serde_json::Value> {
    let all = get_json(&format!("{base}/api/groups/{folder}/messages?limit=1000")).await;
    all.as_array()
        .unwrap()
        .iter()
        .filter(|m| m["from_bot"] == true)
        .cloned()
        .collect()
}

pub async fn get_json(url: &str) -> serde_json::Value {
    http_client()
        .get(url)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// GET a page's text.
pub async fn get_text(url: &str) -> String {
    http_client()
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Raises this process's open-file limit to its hard limit (children
/// inherit it): the connection tests hold hundreds of sockets on each side.
pub fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// How a test connection stalls a server.
#[derive(Debug, Clone, Copy)]
pub enum Stall {
    /// Half a request head, then nothing.
    Head,
    /// A whole head announcing 1,000 bytes of body, then 5 of them.
    Body,
    /// A whole request (GET `idle_path`); then the connection is kept
    /// alive and sends nothing.
    Idle,
}

impl Stall {
    pub fn nth(i: usize) -> Stall {
        [Stall::Head, Stall::Body, Stall::Idle][i % 3]
    }

    /// Writes this stall's bytes to the server at `host` (its `Host`
    /// header: `127.0.0.1:PORT`): `post_path` takes a JSON body.
    pub async fn start<S: tokio::io::AsyncWrite + Unpin>(
        self,
        s: &mut S,
        host: &str,
        post_path: &str,
        idle_path: &str,
    ) {
        use tokio::io::AsyncWriteExt;
        let text = match self {
            Stall::Head => format!("POST {post_path} HTTP/1.1\r\nHost: {host}\r\nContent-Ty"),
            Stall::Body => {
                format!(
                    "POST {post_path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"mo"
                )
            }
            Stall::Idle => format!("GET {idle_path} HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        };
        s.write_all(text.as_bytes()).await.unwrap();
    }
}

/// Reads until the server closes the connection (end of stream or a reset)
/// and returns what it sent; panics if it is still open after `secs` (far
/// beyond the timeouts the tests set).
pub async fn until_closed<S: tokio::io::AsyncRead + Unpin>(mut s: S, secs: u64) -> String {
    use tokio::io::AsyncReadExt;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(secs), async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the server kept a stalled connection open for {secs} s; it sent {:?}",
        String::from_utf8_lossy(&got)
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// Open file descriptors of a process (sockets included).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .unwrap_or(0)
}

/// A group folder the test knows to be valid.
pub fn gf(name: &str) -> GroupFolder {
    GroupFolder::new(name).unwrap()
}

/// The assistant's messages in a group's chat, as text, oldest first.
pub async fn bot_texts(base: &str, folder: &str) -> Vec<String> {
    bot_messages(base, folder)
        .await
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_string())
        .collect()
}

/// Waits (up to `secs`) until a group's chat holds `n` answers; returns
/// them all.
pub async fn wait_bot(base: &str, folder: &str, n: usize, secs: u64) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = bot_texts(base, folder).await;
        if got.len() >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{folder}: {n} answers expected, got {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A home with a `family` group that every message wakes.
pub fn home_with_family() -> TestHome {
    let home = TestHome::new();
    home.ok(&shared::ADD_FAMILY);
    home
}

/// Sends `sig` (`-STOP`, `-CONT`, …) to a process.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Writes an agent request into `folder`'s IPC folder as its MCP tool
/// does; returns where its answer will be.
pub fn put_request(home: &Path, folder: &str, id: &str, action: g2_core::wire::Action) -> PathBuf {
    let req = g2_core::wire::TaskRequest {
        request_id: id.to_string(),
        action,
    };
    g2_core::ipc::write_request(&home.join(format!("data/ipc/{folder}")), &req).unwrap()
}
