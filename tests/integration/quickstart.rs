//! A new user's first day: the README's Quick start run line by line as
//! written, and a git checkout used as the home staying clean.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::*;

/// The Quick start's commands, in order: the README's first ```sh block
/// after `## Quick start`, continued lines joined, comment lines left out.
fn quick_start_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(project_root().join("README.md")).unwrap();
    let section = &readme[readme.find("## Quick start").expect("a Quick start")..];
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a ```sh block in the Quick start");
    let mut lines = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        current.push_str(line);
        // A line ending in `\` continues (bash reads it so too).
        if current.ends_with('\\') {
            current.push('\n');
            continue;
        }
        if !current.trim_start().starts_with('#') && !current.trim().is_empty() {
            lines.push(std::mem::take(&mut current));
        }
        current.clear();
    }
    lines
}

/// `bash -c LINE` in the checkout, as a user in a terminal runs it, on the
/// test's home and this test build's `g2` (G2_BIN: nothing is built).
fn shell(home: &TestHome, line: &str) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(line).current_dir(project_root());
    for (k, _) in std::env::vars() {
        if k.starts_with("G2_") || k.starts_with("ANTHROPIC_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("G2_HOME", home.path())
        .env("G2_BIN", env!("CARGO_BIN_EXE_g2"));
    cmd
}

/// A child's stdout, line by line, on a channel (read on a thread).
fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Lines from `rx` until one contains `want`, within `secs`; all of them.
fn lines_until_contains(rx: &mpsc::Receiver<String>, want: &str, secs: u64) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains(want);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no line with {want:?} within {secs} s; got {seen:#?}"),
        }
    }
}

fn bot_count(base: &str) -> usize {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(bot_messages(base, "main")).len()
}

/// The main group's assistant messages reach `n` within `secs`; the last one.
fn wait_answers(base: &str, n: usize, secs: u64) -> String {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_bot(base, "main", n, secs)).pop().unwrap()
}

#[test]
fn the_readme_quick_start_runs_line_by_line() {
    if !image_ready() {
        return;
    }
    // The lines name the default address; a host already there would answer
    // instead of this one.
    assert!(
        std::net::TcpListener::bind("127.0.0.1:4170").is_ok(),
        "127.0.0.1:4170 is taken: the Quick start's host needs it"
    );
    let lines = quick_start_lines();
    assert_eq!(lines[0].split('#').next().unwrap().trim(), "scripts/run.sh");
    let home = TestHome::empty();
    let base = "http://127.0.0.1:4170";
    let started = Instant::now();
    let mut host = shell(&home, &lines[0])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(home.path().join("run.log")).unwrap())
        .spawn()
        .unwrap();
    let host_out = stdout_lines(&mut host);
    let ready = format!("g2 is ready: viewer {base}/");
    let mut stop = Stopper(host);
    lines_until_contains(&host_out, &ready, 120);
    for line in &lines[1..] {
        let before = bot_count(base);
        if line.contains(" chat ") {
            chat_line(&home, line, base, before);
            continue;
        }
        let mut out = shell(&home, line).output().unwrap();
        // The recall line says it finds the boat by meaning: it does once
        // the host has embedded the message, seconds after its turn.
        let deadline = Instant::now() + Duration::from_secs(60);
        while line.contains("memory search")
            && out.status.success()
            && !String::from_utf8_lossy(&out.stdout).contains("pier 7")
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(500));
            out = shell(&home, line).output().unwrap();
        }
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{line}\nfailed: {stderr}\n{stdout}");
        if line.contains("memory search") {
            let first = stdout.lines().next().unwrap_or("");
            assert!(first.contains("pier 7"), "{line}: the boat first\n{stdout}");
        }
        if line.starts_with("curl") {
            assert!(stdout.contains("\"seq\""), "{line}: {stdout}");
            wait_answers(base, before + 1, 120);
        }
    }
    stop.stop();
    eprintln!(
        "the Quick start took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `… chat main`: a line typed gets a reply printed, `/quit` leaves.
fn chat_line(home: &TestHome, line: &str, base: &str, before: usize) {
    let mut chat = shell(home, line)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = stdout_lines(&mut chat);
    let mut stdin = chat.stdin.take().unwrap();
    writeln!(stdin, "hello from the quick start").unwrap();
    let reply = wait_answers(base, before + 1, 120);
    let first = reply.lines().next().unwrap_or_default();
    lines_until_contains(&out, first, 30);
    writeln!(stdin, "/quit").unwrap();
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = chat.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{line}: still running after /quit"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{line}: {status}");
}

/// The Quick start's host: stopped as a user does, with Ctrl-C (SIGINT to
/// its process, which `exec`s `g2 serve`), also when the test fails.
struct Stopper(Child);

impl Stopper {
    fn stop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            signal(self.0.id(), "-INT");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.0.try_wait() {
                assert!(s.success() || std::thread::panicking(), "g2 serve: {s}");
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
        if !std::thread::panicking() {
            panic!("g2 serve did not stop within 30 s of Ctrl-C");
        }
    }
}

impl Drop for Stopper {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            self.stop();
        }
    }
}

/// The checkout's tracked files, copied into `dest` and committed there: a
/// fresh clone of the working tree as it is.
fn clone_checkout(dest: &Path) {
    let root = project_root();
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files");
    for name in listed.stdout.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = root.join(name);
        // Tracked but deleted in the working tree: not part of it.
        if !from.exists() {
            continue;
        }
        let to = dest.join(name);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    git(dest, &["init", "-q"]);
    git(dest, &["add", "-A"]);
    git(
        dest,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "clone",
        ],
    );
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_checkout_used_as_the_home_stays_clean() {
    if !image_ready() {
        return;
    }
    let home = TestHome::empty();
    clone_checkout(home.path());
    // The test's own log of the host (support::serve), not g2's.
    std::fs::write(home.path().join(".git/info/exclude"), "/serve.log\n").unwrap();
    home.ok(&["init"]);
    assert_eq!(
        git(home.path(), &["status", "--porcelain"]),
        "",
        "after init"
    );
    let s = serve(&home, &[]);
    let mut chat = crate::steps::Chat::open(&s.url, "main").await;
    assert!(!chat.say("me", "hello").await.is_empty());
    home.ok(&["sessions", "clear", "main", "--name", "first"]);
    assert_eq!(home.archives("main").len(), 1, "the session was archived");
    assert_eq!(
        git(
            home.path(),
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        "",
        "after a chat and a clear"
    );
    drop(s);
    assert_eq!(
        git(
            home.path(),
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        "",
        "after the host stopped"
    );
}
