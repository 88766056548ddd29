//! A `g2 serve` child process on a free loopback port, shared by the
//! integration tests (`support.rs`) and the benches
//! (`host/benches/common/mod.rs`, which include this file by path).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `g2` (a command with its `--home` and environment set) as
/// `serve --listen 127.0.0.1:0` with stdout piped; returns the child and
/// the `http://127.0.0.1:PORT` of its `api ` line, once it has printed its
/// last startup line (`g2 is ready: …`).
pub fn spawn(mut g2: Command) -> (Child, String) {
    let mut child = g2
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting g2 serve");
    let mut url = None;
    for line in BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        if let Some(u) = line.strip_prefix("api ") {
            url = Some(u.trim().to_string());
        }
        if line.starts_with("g2 is ready: viewer ") {
            break;
        }
    }
    (child, url.expect("g2 serve printed its address"))
}

/// SIGTERM first (a graceful stop closes the agents' containers), up to
/// 40 s for the exit, then SIGKILL. Never signals a pid that was already
/// reaped: it may be someone else's by now.
pub fn stop(child: &mut Child) {
    if matches!(child.try_wait(), Ok(None)) {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    let deadline = Instant::now() + Duration::from_secs(40);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
