//! A headless Chromium driven through WebDriver: a chromedriver of its
//! own (Debian's `chromium-driver`) on a free port, one session with a
//! fresh profile, and the whole process group ended when dropped. Shared
//! by the viewer's tests and its bench.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// A chromedriver and a headless Chromium session; both end when dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, and the browser it
        // started is in it: the whole group goes, even after a failed test
        // that never closed its session.
        if let Some(pid) = rustix::process::Pid::from_raw(self.driver.id() as i32) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.driver.wait();
    }
}

impl Browser {
    pub async fn start() -> Browser {
        Browser::start_with(&[]).await
    }

    /// A browser started with `extra` command-line switches as well.
    pub async fn start_with(extra: &[String]) -> Browser {
        // The WebDriver client speaks rustls; ring is the provider the host
        // already uses (a second install is refused, which is fine).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1200,900".into(),
            "--disable-crash-reporter".into(),
            "--disable-breakpad".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        args.extend(extra.iter().cloned());
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), json!({ "args": args }));
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match ClientBuilder::rustls()
                .expect("a TLS setup for the WebDriver client")
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) => {
                    assert!(
                        Instant::now() < deadline,
                        "chromedriver never answered: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Waits until `script` (a JS expression) is true in the page.
    pub async fn until(&self, what: &str, script: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let v = self
                .client
                .execute(&format!("return !!({script});"), vec![])
                .await
                .unwrap();
            if v == json!(true) {
                return;
            }
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn eval(&self, script: &str) -> serde_json::Value {
        self.client
            .execute(&format!("return ({script});"), vec![])
            .await
            .unwrap()
    }

    /// Saves the page as `{name}.png` under the tests' output folder.
    pub async fn screenshot(&self, name: &str) {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("viewer");
        std::fs::create_dir_all(&dir).unwrap();
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Clicks `selector`, accepts the confirmation the page asks for, and
    /// waits until `done` (a JS expression) is true.
    pub async fn confirm_click(&self, selector: &str, what: &str, done: &str) {
        self.client
            .find(Locator::Css(selector))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.client.get_alert_text().await.is_err() {
            assert!(Instant::now() < deadline, "no confirmation was asked");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.client.accept_alert().await.unwrap();
        self.until(what, done).await;
    }
}
