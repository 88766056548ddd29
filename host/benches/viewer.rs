//! The web viewer's costs, against a real `g2 serve` and a real headless
//! Chromium (WebDriver, as in the tests):
//! - server time: the page's whole response read by an HTTP client,
//!   p50/p99 over `G2_BENCH_RUNS` (default 50) requests;
//! - browser time: navigation start to the end of `load`, from the
//!   browser's own Navigation Timing, p50 over 10 loads;
//! - page weight: the HTML plus the stylesheet and script it loads.
//!
//! For the groups page and for an archive of 1 MB of markdown (2,000
//! exchanges with headings, rendered with its table of contents); the
//! weight of every page of a group with a little content.
//!
//! `cargo bench -p g2-host --bench viewer`

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Samples, Serve, env_or, fmt_dur, init_home};
use g2_core::validate::GroupFolder;
use g2_host::archives::{Prepared, Trigger};
use g2_host::store::Store;

/// A 1 MB archive of `main`, recorded as the host records archives.
fn big_archive(home: &std::path::Path) -> i64 {
    let mut body =
        String::from("# A long conversation\n\nArchived: Nov 1, 2026, 9:00 AM\n\n---\n\n");
    let mut n = 0;
    while body.len() < 1 << 20 {
        n += 1;
        if n % 50 == 1 {
            body.push_str(&format!("## Part {}\n\n", n / 50 + 1));
        }
        body.push_str(&format!(
            "**Ann** (09:{:02}): what did we decide about the garden shed, the fence and the paint? Item {n}.\n\n\
             **G2**: We chose the green paint for the fence, the shed roof gets new felt in spring, and \
             Bob will buy the screws. See [the plan](https://example.org/plan/{n}) and `notes-{n}.md`.\n\n",
            n % 60
        ));
    }
    let rel = "groups/main/conversations/2026-11-01-long.md";
    std::fs::write(home.join(rel), &body).unwrap();
    let store = Store::open(&home.join("data/g2.db"), Duration::from_secs(5)).unwrap();
    store
        .write_blocking(move |tx| {
            let p = Prepared {
                group: GroupFolder::new("main").unwrap(),
                session_id: None,
                title: "A long conversation".into(),
                file_name: "2026-11-01-long.md".into(),
                rel_path: rel.into(),
                body,
                trigger: Trigger::Manual,
                created_at: "2026-11-01T09:00:00.000Z".into(),
                stats: Default::default(),
                pending: false,
            };
            Ok(g2_host::store::archives::insert(tx, &p)?.id)
        })
        .unwrap()
}

fn main() {
    let runs: usize = env_or("G2_BENCH_RUNS", 50);
    let home = tempfile::tempdir().unwrap();
    init_home(home.path());
    let id = big_archive(home.path());
    let serve = Serve::start(home.path(), &[]);
    let rt = common::runtime();
    let http = reqwest::Client::new();
    let get = |path: String| {
        let (http, url) = (http.clone(), format!("{}{path}", serve.url));
        rt.block_on(async move {
            let r = http.get(url).send().await.unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            r.bytes().await.unwrap().len()
        })
    };
    let assets = get("/assets/app.css".into()) + get("/assets/app.js".into());
    println!("viewer: server time (HTTP, whole response), {runs} runs");
    for (label, path) in [
        ("groups page", "/".to_string()),
        ("1 MB archive", format!("/archives/{id}")),
    ] {
        let mut samples = Vec::new();
        let mut size = 0;
        for _ in 0..runs {
            let t = Instant::now();
            size = get(path.clone());
            samples.push(t.elapsed());
        }
        let s = Samples::of(samples);
        println!(
            "  {label:<14} p50 {:>9}  p99 {:>9}  ({} KB of HTML)",
            fmt_dur(s.at(0.5)),
            fmt_dur(s.at(0.99)),
            size / 1024
        );
    }
    println!(
        "viewer: page weight (HTML + {} KB of stylesheet and script)",
        assets / 1024
    );
    for path in [
        "/",
        "/groups/main",
        "/groups/main/sessions",
        "/groups/main/archives",
        "/groups/main/memory",
        "/search?q=garden+shed",
        "/tasks",
        "/usage",
    ] {
        let html = get(path.into());
        println!("  {path:<24} {:>6.1} KB", (html + assets) as f64 / 1024.0);
    }

    // The browser's own timing.
    rt.block_on(async {
        let b = common::browser::Browser::start().await;
        println!("viewer: browser time (navigation start to load end, p50 of 10)");
        for (label, path) in [
            ("groups page", "/".to_string()),
            ("1 MB archive", format!("/archives/{id}")),
        ] {
            let mut samples = Vec::new();
            for _ in 0..10 {
                b.client
                    .goto(&format!("{}{path}", serve.url))
                    .await
                    .unwrap();
                let load = b
                    .eval("performance.getEntriesByType('navigation')[0].loadEventEnd")
                    .await;
                samples.push(Duration::from_secs_f64(load.as_f64().unwrap() / 1000.0));
            }
            let s = Samples::of(samples);
            println!(
                "  {label:<14} p50 {:>9}  max {:>9}",
                fmt_dur(s.at(0.5)),
                fmt_dur(s.at(1.0))
            );
        }
    });
}
