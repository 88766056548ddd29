//! Memory injection from the hook's side: `SessionStart` and
//! `UserPromptSubmit` ask the host for the group's memory over the group's
//! gateway socket (`ipc/model.sock`, the group's identity) and print it as
//! `hookSpecificOutput.additionalContext`, which Claude Code adds to the
//! agent's context (`docs/claude-code.md`, "Hooks").
//!
//! The whole exchange has [`DEADLINE`] (or the host's
//! `memory.inject_wait_ms`, see [`wait`]): a host that is slow, gone or
//! refusing costs the turn at most that, and then nothing is injected. The
//! request is one HTTP/1.1 `POST` with `Connection: close` on a blocking
//! Unix socket with timeouts: the hook is a short synchronous process, and
//! a client library would cost more start-up than the exchange itself.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use g2_core::wire;
use serde_json::{Value, json};

/// The longest a hook waits for the memory, unless the host says otherwise.
pub const DEADLINE: Duration = Duration::from_millis(50);
/// The most the host may raise it to: a hook never holds a turn longer.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// The host's route on the group socket (`memory::context::PATH`).
pub const PATH: &str = "/g2/memory/context";
/// Longest answer read.
const MAX_ANSWER: u64 = 256 << 10;

/// How long to wait: [`wire::ENV_INJECT_WAIT_MS`] when the host set it
/// (1 ms to [`MAX_WAIT`]), else [`DEADLINE`].
pub fn wait() -> Duration {
    std::env::var(wire::ENV_INJECT_WAIT_MS)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEADLINE, |ms| {
            Duration::from_millis(ms).clamp(Duration::from_millis(1), MAX_WAIT)
        })
}

/// The memory the host gives for `request` within `wait`, or None (no
/// socket, too slow, an error, or nothing to inject).
pub fn ask(socket: &Path, request: &Value, wait: Duration) -> Option<String> {
    context(&exchange(socket, request, wait)?)
}

/// The answer's block, when it holds one.
pub fn context(answer: &Value) -> Option<String> {
    let context = answer["context"].as_str()?.trim();
    (!context.is_empty()).then(|| context.to_string())
}

/// The host's JSON answer to `request` within `wait`, or None (no socket,
/// too slow, an error).
pub fn exchange(socket: &Path, request: &Value, wait: Duration) -> Option<Value> {
    let start = Instant::now();
    let left = || wait.checked_sub(start.elapsed()).filter(|d| !d.is_zero());
    let mut s = UnixStream::connect(socket).ok()?;
    s.set_write_timeout(left()).ok()?;
    let body = request.to_string();
    // One write: the request arrives whole.
    let message = format!(
        "POST {PATH} HTTP/1.1\r\nHost: g2\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(message.as_bytes()).ok()?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        s.set_read_timeout(Some(left()?)).ok()?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&chunk[..n]);
                if answer.len() as u64 > MAX_ANSWER {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
    let text = String::from_utf8(answer).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// What the hook prints for Claude Code: the context for `event`.
pub fn output(event: &str, context: &str) -> String {
    json!({
        "hookSpecificOutput": {
            "hookEventName": event,
            "additionalContext": context,
        }
    })
    .to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn serve_once(dir: &Path, answer: &'static str, delay: Duration) -> std::path::PathBuf {
        let path = dir.join("model.sock");
        serve_once_at(&path, answer, delay);
        path
    }

    /// Answers one request on a socket at `path` with `answer`, after
    /// `delay`.
    pub(crate) fn serve_once_at(path: &Path, answer: &'static str, delay: Duration) {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            if let Ok((mut c, _)) = l.accept() {
                // The whole request is read first: a socket closed with
                // unread data resets the client's read.
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n @ 1..) = c.read(&mut buf) {
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .and_then(|n| n.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if body.len() >= len {
                            break;
                        }
                    }
                }
                std::thread::sleep(delay);
                let _ = c.write_all(answer.as_bytes());
            }
        });
    }

    #[test]
    fn the_hosts_answer_becomes_additional_context() {
        let d = tempfile::tempdir().unwrap();
        let sock = serve_once(
            d.path(),
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{\"context\":\"<g2-memory>\\npier 7\\n</g2-memory>\"}",
            Duration::ZERO,
        );
        let got = ask(&sock, &json!({"event": "SessionStart"}), DEADLINE).unwrap();
        assert_eq!(got, "<g2-memory>\npier 7\n</g2-memory>");
        let out: Value = serde_json::from_str(&output("SessionStart", &got)).unwrap();
        assert_eq!(out["hookSpecificOutput"]["hookEventName"], "SessionStart");
        assert_eq!(out["hookSpecificOutput"]["additionalContext"], got);
    }

    #[test]
    fn slow_missing_or_failing_hosts_inject_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(ask(&d.path().join("none.sock"), &json!({}), DEADLINE), None);
        let slow = serve_once(
            d.path(),
            "HTTP/1.1 200 OK\r\n\r\n{\"context\":\"late\"}",
            Duration::from_millis(300),
        );
        let t = Instant::now();
        assert_eq!(ask(&slow, &json!({}), DEADLINE), None);
        assert!(
            t.elapsed() < Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
        let d2 = tempfile::tempdir().unwrap();
        let failing = serve_once(d2.path(), "HTTP/1.1 500 Oops\r\n\r\n{}", Duration::ZERO);
        assert_eq!(ask(&failing, &json!({}), DEADLINE), None);
        let d3 = tempfile::tempdir().unwrap();
        let empty = serve_once(
            d3.path(),
            "HTTP/1.1 200 OK\r\n\r\n{\"context\":\"\"}",
            Duration::ZERO,
        );
        assert_eq!(ask(&empty, &json!({}), DEADLINE), None);
    }

    #[test]
    fn a_longer_wait_set_by_the_host_gets_a_slow_answer() {
        let d = tempfile::tempdir().unwrap();
        let slow = serve_once(
            d.path(),
            "HTTP/1.1 200 OK\r\n\r\n{\"context\":\"late\"}",
            Duration::from_millis(150),
        );
        assert_eq!(
            ask(&slow, &json!({}), Duration::from_millis(2000)).as_deref(),
            Some("late")
        );
    }
}
