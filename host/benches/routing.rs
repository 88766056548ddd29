//! Routing latency: a message accepted by `POST /api/groups/main/messages`
//! → the agent's reply on the group's SSE stream, with a warm container
//! (real `g2 serve`, real Docker, real Claude Code in the agent image, the
//! offline model). The model's own time (the gateway's `duration_ms` of the
//! requests made during the message) is reported and subtracted.
//!
//! `cargo bench -p g2-host --bench routing` (`G2_BENCH_MESSAGES`, default
//! 200). Needs the agent image (`g2 image build`).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Samples, Serve, init_home};
use futures_util::StreamExt;

fn main() {
    let n: usize = common::env_or("G2_BENCH_MESSAGES", 200);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let serve = Serve::start(home.path(), &[]);
    let base = serve.url.clone();
    let rt = common::runtime();
    let input_dir = home.path().join("data/ipc/main/input");
    let (total, windows, host_in, host_out) = rt.block_on(async move {
        let (client, resp) = common::main_stream(&base).await;
        let (tx, mut replies) = tokio::sync::mpsc::unbounded_channel::<(
            Instant,
            String,
            chrono::DateTime<chrono::Utc>,
            chrono::DateTime<chrono::Utc>,
        )>();
        tokio::spawn(async move {
            let mut messages = std::pin::pin!(g2_host::chat::message_stream(resp));
            while let Some(m) = messages.next().await {
                if m.from_bot {
                    let stored = chrono::DateTime::parse_from_rfc3339(&m.timestamp)
                        .unwrap()
                        .with_timezone(&chrono::Utc);
                    let _ = tx.send((Instant::now(), m.text, stored, chrono::Utc::now()));
                }
            }
        });
        let post = |text: String| {
            let (client, base) = (client.clone(), base.clone());
            async move { common::post_main(&client, &base, &text).await }
        };
        // Cold start, then warm.
        post("warm up".into()).await;
        let (_, first, _, _) = tokio::time::timeout(Duration::from_secs(180), replies.recv())
            .await
            .expect("no reply")
            .unwrap();
        assert!(first.contains("warm up"), "{first}");
        // When each follow-up lands in the container's input/ (the host's
        // part of the way in): the rename that publishes it.
        let (ftx, mut follow_ups) = tokio::sync::mpsc::unbounded_channel::<Instant>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(ev) = res
                && matches!(
                    ev.kind,
                    notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
                )
                && ev.paths.iter().any(|p| {
                    p.extension().is_some_and(|e| e == "json")
                        && !p.file_name().unwrap().to_string_lossy().starts_with('.')
                })
            {
                let _ = ftx.send(Instant::now());
            }
        })
        .unwrap();
        notify::Watcher::watch(
            &mut watcher,
            &input_dir,
            notify::RecursiveMode::NonRecursive,
        )
        .unwrap();
        let mut host_in = Vec::new();
        let mut host_out = Vec::new();
        let mut total = Vec::new();
        let mut windows = Vec::new();
        for i in 0..n {
            let text = format!("ping {i}");
            let wall = chrono::Utc::now();
            let t0 = Instant::now();
            post(text.clone()).await;
            let (at, reply, stored, seen) =
                tokio::time::timeout(Duration::from_secs(60), replies.recv())
                    .await
                    .expect("no reply")
                    .unwrap();
            host_out.push((seen - stored).to_std().unwrap_or_default());
            while let Ok(f) = follow_ups.try_recv() {
                if f >= t0 {
                    host_in.push(f - t0);
                    break;
                }
            }
            while follow_ups.try_recv().is_ok() {}
            assert!(reply.contains(&format!("\"{text}\"")), "{reply}");
            total.push(at - t0);
            windows.push((wall, wall + chrono::Duration::from_std(at - t0).unwrap()));
        }
        drop(watcher);
        (total, windows, host_in, host_out)
    });
    drop(serve);
    // The model's time within each message's window.
    let (store, backend) = common::home_store(home.path());
    let usage: Vec<(chrono::DateTime<chrono::Utc>, i64)> = store
        .read_blocking(|c| {
            c.query_all(
                "SELECT started_at, duration_ms FROM model_usage ORDER BY id",
                (),
                |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)),
            )
        })
        .unwrap()
        .into_iter()
        .map(|(s, d)| {
            (
                chrono::DateTime::parse_from_rfc3339(&s)
                    .unwrap()
                    .with_timezone(&chrono::Utc),
                d,
            )
        })
        .collect();
    let mut model = Vec::new();
    let mut requests = 0;
    let mut net = Vec::new();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for (t, (from, to)) in total.iter().zip(&windows) {
        let rows: Vec<&(chrono::DateTime<chrono::Utc>, i64)> =
            usage.iter().filter(|(s, _)| s >= from && s <= to).collect();
        // Where the rest goes: accepted → first model request, last model
        // answer → reply on the stream (millisecond timestamps).
        if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
            before.push((first.0 - *from).to_std().unwrap_or_default());
            after.push(
                (*to - last.0 - chrono::Duration::milliseconds(last.1))
                    .to_std()
                    .unwrap_or_default(),
            );
        }
        let inside: Vec<i64> = rows.iter().map(|(_, d)| *d).collect();
        requests += inside.len();
        let m = Duration::from_millis(inside.iter().sum::<i64>() as u64);
        model.push(m);
        net.push(t.saturating_sub(m));
    }
    let (t, m, x) = (Samples::of(total), Samples::of(model), Samples::of(net));
    println!(
        "routing: {n} messages to a warm container ({backend}), HTTP accepted -> reply on the SSE stream"
    );
    println!("  total         {}", t.p50_p99());
    println!(
        "  model's time  {} ({requests} model requests)",
        m.p50_p99()
    );
    println!("  minus model   {}", x.p50_p99());
    let (b, a) = (Samples::of(before), Samples::of(after));
    println!("    accepted -> model request   {}", b.p50_p99());
    let h = Samples::of(host_in);
    println!(
        "      of which the host: accepted -> follow-up in input/  {} ({} seen)",
        h.p50_p99(),
        h.n()
    );
    println!("    model answer -> on stream   {}", a.p50_p99());
    let o = Samples::of(host_out);
    println!(
        "      of which the host: reply stored -> on stream  {} (ms clock)",
        o.p50_p99()
    );
}
