//! `g2 chat` as a person uses it, on a pseudo-terminal, against a real
//! `g2 serve` (offline model, real Docker) that is restarted under it; its
//! errors; and every command's output into a closed pipe.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{
    TestHome, get_text, home_with_family, http_client, image_ready, post, serve, signal, wait_bot,
};

/// A child on a pseudo-terminal, and all it has printed (`\r` dropped).
struct Pty {
    child: Child,
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
}

impl Pty {
    fn spawn(mut cmd: Command) -> Pty {
        use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let size = rustix::termios::Winsize {
            ws_row: 40,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&master, size).unwrap();
        let slave: OwnedFd = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(name.to_str().unwrap())
            .unwrap()
            .into();
        cmd.env("TERM", "xterm")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().expect("starting g2 chat");
        let master = std::fs::File::from(master);
        let seen = Arc::new(Mutex::new(String::new()));
        let (mut reader, mut answer, into) = (
            master.try_clone().unwrap(),
            master.try_clone().unwrap(),
            seen.clone(),
        );
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).replace('\r', "");
                // The line editor asks where the cursor is, as a terminal
                // would be asked.
                if text.contains("\x1b[6n") {
                    let _ = answer.write_all(b"\x1b[1;1R");
                }
                into.lock().unwrap().push_str(&text);
            }
        });
        Pty {
            child,
            master,
            seen,
        }
    }

    fn seen(&self) -> String {
        self.seen.lock().unwrap().clone()
    }

    /// Waits (up to `secs`) until what was printed after byte `from`
    /// holds `what`; where it ends.
    fn expect(&self, from: usize, what: &str, secs: u64) -> usize {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let seen = self.seen();
            if let Some(at) = seen.get(from..).and_then(|s| s.find(what)) {
                return from + at + what.len();
            }
            assert!(
                Instant::now() < deadline,
                "{what:?} not printed in {secs} s; the terminal shows:\n{}",
                &seen[from.min(seen.len())..]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn type_line(&mut self, line: &str) {
        self.master
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `g2 serve` on this home and `addr` (`127.0.0.1:PORT`); returns once its
/// API answers.
async fn serve_on(home: &TestHome, addr: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(home.path().join("serve.log"))
        .unwrap();
    let child = home
        .command(&["serve", "--listen", addr], &[])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let up = || async {
        let r = reqwest::get(format!("http://{addr}/api/groups")).await;
        r.is_ok_and(|r| r.status().is_success())
    };
    while !up().await {
        assert!(Instant::now() < deadline, "g2 serve did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child
}

/// The first line of the latest of `n` replies in the family chat.
async fn nth_reply(url: &str, n: usize) -> String {
    let replies = wait_bot(url, "family", n, 120).await;
    replies[n - 1].lines().next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_shows_what_it_missed_while_the_host_restarted() {
    if !image_ready() {
        return;
    }
    let home = home_with_family();
    let mut s = serve(&home, &[]);
    let url = s.url.clone();
    let mut chat = Pty::spawn(home.command(&["chat", "family", "--url", &url], &[]));
    let at = chat.expect(0, "chat with Family (groups/family/)", 20);
    let at = chat.expect(at, "you> ", 10);

    chat.type_line("hello, who is there?");
    let first = nth_reply(&url, 1).await;
    let at = chat.expect(at, &first, 30);

    // The host stops; the chat notices, and is held still while the host
    // is back and answers a message posted meanwhile.
    signal(s.child.id(), "-TERM");
    let deadline = Instant::now() + Duration::from_secs(30);
    while s.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "g2 serve did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at = chat.expect(at, "host went away; reconnecting…", 20);
    signal(chat.child.id(), "-STOP");
    s.child = serve_on(&home, url.trim_start_matches("http://")).await;
    post(&url, "family", "ann", "what is for dinner?").await;
    let missed = nth_reply(&url, 2).await;
    signal(chat.child.id(), "-CONT");
    let at = chat.expect(at, "reconnected", 20);
    let at = chat.expect(at, "ann: what is for dinner?", 10);
    let at = chat.expect(at, &missed, 10);

    // A line typed now is answered.
    chat.type_line("and after the restart?");
    let third = nth_reply(&url, 3).await;
    chat.expect(at, &third, 30);
    let shown = chat.seen();
    assert_eq!(shown.matches(&first).count(), 1, "{shown}");

    // A group that needs a trigger: a line without it is posted, with a
    // hint; piped, stdout holds only the chat.
    let added = http_client()
        .post(format!("{url}/api/groups"))
        .json(&serde_json::json!({ "folder": "quiet", "name": "Quiet" }))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    let mut piped = home
        .command(&["chat", "quiet", "--url", &url], &[])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    piped
        .stdin
        .take()
        .unwrap()
        .write_all(b"no trigger here\n")
        .unwrap();
    let out = piped.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("the agent answers messages starting with @")
            && err.contains(
                "(in the chat, but not to the agent: this group answers messages starting with @"
            ),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let stored = get_text(&format!("{url}/api/groups/quiet/messages")).await;
    assert!(stored.contains("no trigger here"), "{stored}");

    let err = home.fails(&["chat", "nosuch", "--url", &url]);
    assert_eq!(
        err.trim(),
        r#"error: no group "nosuch" (g2 groups list shows them)"#
    );
}

#[test]
fn chat_with_no_host_says_how_to_start_one() {
    let home = TestHome::new();
    // A port nothing listens on: bound, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let err = home.fails(&["chat", "main", "--url", &url]);
    assert_eq!(
        err.trim(),
        format!(
            "error: g2 serve is not running at {url} (start it with scripts/run.sh or g2 serve)"
        )
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let home = TestHome::new();
    for args in [
        &["groups", "list", "--json"][..],
        &["groups", "list"],
        &["--help"],
    ] {
        // The reader is gone before g2 writes a byte.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = home
            .command(args, &[])
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).as_ref()
            ),
            (Some(0), ""),
            "g2 {args:?}"
        );
    }
}
