//! Gateway overhead: time to first byte of a streamed answer through the
//! real `g2 gateway` process versus straight from the upstream server.
//!
//! An upstream server in this process replays a recorded Anthropic stream
//! (`tests/fixtures/anthropic/stream.sse`). The client sends 1,000
//! streaming requests each way, alternating direct and through the gateway
//! (loopback TCP, and the group's Unix socket), all on kept-alive
//! connections, and times from sending the request to the first body chunk.
//! A second run has upstream pause 20 ms after the first event: the time to
//! first byte through the gateway stays near the direct one while the whole
//! answer takes 20 ms more, showing events are relayed as they arrive.
//!
//! `cargo bench -p g2-host --bench gateway` (`G2_BENCH_REQUESTS` changes
//! the count).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use futures_util::StreamExt;

use common::{command, g2_binary, project_root};

const SLOW_PAUSE: Duration = Duration::from_millis(20);

fn events() -> Vec<Bytes> {
    let text = std::fs::read_to_string(project_root().join("tests/fixtures/anthropic/stream.sse"))
        .unwrap();
    text.split_inclusive("\n\n")
        .map(|e| Bytes::from(e.to_string()))
        .collect()
}

async fn upstream(req: Request) -> Response {
    let slow = req.uri().query().is_some_and(|q| q.contains("slow"));
    let _ = axum::body::to_bytes(req.into_body(), usize::MAX).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        for (i, e) in events().into_iter().enumerate() {
            if tx.send(e).await.is_err() {
                return;
            }
            if slow && i == 0 {
                tokio::time::sleep(SLOW_PAUSE).await;
            }
        }
    });
    let body = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }));
    ([("content-type", "text/event-stream")], body).into_response()
}

struct Gateway {
    child: Child,
    url: String,
    socket: PathBuf,
    _home: tempfile::TempDir,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gateway(upstream: &str) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    let g2 = g2_binary();
    let init = command(&g2)
        .arg("--home")
        .arg(home.path())
        .arg("init")
        .stdout(Stdio::null())
        .status();
    assert!(init.unwrap().success());
    let mut child = command(&g2)
        .arg("--home")
        .arg(home.path())
        .args(["gateway", "--listen", "127.0.0.1:0"])
        .env("ANTHROPIC_API_KEY", "sk-ant-bench")
        .env("G2_GATEWAY__UPSTREAM_URL", upstream)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut url = None;
    let mut socket = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["listening", u] => url = Some(u.to_string()),
            ["group", "main", p] => socket = Some(PathBuf::from(p)),
            ["try", ..] => break,
            _ => {}
        }
    }
    Gateway {
        child,
        url: url.unwrap(),
        socket: socket.unwrap(),
        _home: home,
    }
}

const BODY: &str = r#"{"model":"claude-bench","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello"}]}"#;

/// (time to first body chunk, time to the end) of one streamed request.
async fn once(client: &reqwest::Client, url: &str) -> (Duration, Duration) {
    let t = Instant::now();
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let mut s = resp.bytes_stream();
    let first = s.next().await.expect("a first chunk").unwrap();
    let ttfb = t.elapsed();
    assert!(first.starts_with(b"event: message_start"));
    while let Some(c) = s.next().await {
        c.unwrap();
    }
    (ttfb, t.elapsed())
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

fn main() {
    let n: usize = common::env_or("G2_BENCH_REQUESTS", 1000);
    let rt = common::runtime();
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, Router::new().route("/v1/messages", post(upstream))).await.unwrap();
        });
        let gw = start_gateway(&up);
        let tcp = reqwest::Client::builder().tcp_nodelay(true).build().unwrap();
        let unix = reqwest::Client::builder().unix_socket(gw.socket.clone()).build().unwrap();
        let routes: [(&str, &reqwest::Client, String); 3] = [
            ("direct to upstream", &tcp, format!("{up}/v1/messages")),
            ("through gateway, TCP", &tcp, format!("{}/v1/messages", gw.url)),
            ("through gateway, group socket", &unix, "http://g2/v1/messages".to_string()),
        ];
        for (_, c, u) in &routes {
            for _ in 0..100 {
                once(c, u).await;
            }
        }
        let mut ttfb: Vec<Vec<Duration>> = vec![Vec::with_capacity(n); routes.len()];
        for _ in 0..n {
            for (i, (_, c, u)) in routes.iter().enumerate() {
                ttfb[i].push(once(c, u).await.0);
            }
        }
        println!("time to first byte of a streamed answer, {n} requests each (ms)");
        println!("{:<32} {:>8} {:>8} {:>8}", "route", "p50", "p99", "mean");
        let direct50 = pct(&mut ttfb[0].clone(), 0.5);
        let direct99 = pct(&mut ttfb[0].clone(), 0.99);
        for (i, (name, _, _)) in routes.iter().enumerate() {
            let v = &mut ttfb[i];
            let mean = v.iter().map(Duration::as_secs_f64).sum::<f64>() / v.len() as f64 * 1e3;
            let (p50, p99) = (pct(v, 0.5), pct(v, 0.99));
            print!("{name:<32} {p50:>8.3} {p99:>8.3} {mean:>8.3}");
            if i > 0 {
                print!("   added: p50 {:+.3}, p99 {:+.3}", p50 - direct50, p99 - direct99);
            }
            println!();
        }

        // Relayed as it arrives: upstream pauses after the first event.
        let slow = 100;
        let mut first = Vec::new();
        let mut whole = Vec::new();
        for _ in 0..slow {
            let (f, w) = once(&tcp, &format!("{}/v1/messages?slow", gw.url)).await;
            first.push(f);
            whole.push(w);
        }
        println!(
            "\nupstream pausing {} ms after its first event, through the gateway, {slow} requests:\n\
             first byte p50 {:.3} ms, whole answer p50 {:.3} ms",
            SLOW_PAUSE.as_millis(),
            pct(&mut first, 0.5),
            pct(&mut whole, 0.5)
        );
    });
}
