//! `/mcp`'s round trip: rmcp's client calling `memory_search` over HTTP on
//! a release `g2 serve` whose group `main` holds `G2_BENCH_ARCHIVES`
//! archives (default 10,000, 20 exchanges each, with a vector for every
//! passage so recall runs by words and by meaning), `G2_BENCH_RUNS` calls
//! (default 300) of varied questions after 20 to warm up: p50/p99, and
//! the token lookups the host made per call (`GET /api/host`'s
//! `mcp.token_lookups`, read before and after).
//!
//! `cargo bench --workspace --bench mcp`; `G2_BIN=target/debug/g2` for
//! the test build.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use common::{
    Rng, Samples, Serve, WORDS, command, env_or, g2_binary, home_store, init_home, random_vectors,
    runtime, sentence, word_archives,
};

async fn lookups(url: &str) -> u64 {
    let v: Value = reqwest::get(format!("{url}/api/host"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["mcp"]["token_lookups"].as_u64().unwrap()
}

fn main() {
    let archives: usize = env_or("G2_BENCH_ARCHIVES", 10_000);
    let runs: usize = env_or("G2_BENCH_RUNS", 300);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    init_home(&home);
    let t = Instant::now();
    word_archives(&home, archives);
    let (store, _) = home_store(&home);
    random_vectors(&store);
    drop(store);
    println!(
        "home: {archives} archives in group main, vectors for every passage ({:.1} s)",
        t.elapsed().as_secs_f64()
    );
    let out = command(g2_binary())
        .arg("--home")
        .arg(&home)
        .args(["mcp", "tokens", "create", "main", "--name", "bench"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let serve = Serve::start(&home, &[("G2_PROVIDER", "offline")]);
    let _ = rustls::crypto::ring::default_provider().install_default();
    runtime().block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", serve.url))
            .auth_header(token);
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        let client = ().serve(transport).await.unwrap();
        let mut rng = Rng::default();
        let ask = |rng: &mut Rng| {
            let q = format!("where is the {}?", sentence(rng, 3));
            CallToolRequestParams::new("memory_search")
                .with_arguments(json!({ "query": q }).as_object().unwrap().clone())
        };
        for _ in 0..20 {
            client.call_tool(ask(&mut rng)).await.unwrap();
        }
        let before = lookups(&serve.url).await;
        let (mut samples, mut found) = (Vec::with_capacity(runs), 0);
        for _ in 0..runs {
            let call = ask(&mut rng);
            let t = Instant::now();
            let r = client.call_tool(call).await.unwrap();
            samples.push(t.elapsed());
            let text = r.content[0].as_text().unwrap().text.clone();
            assert!(r.is_error != Some(true), "{text}");
            if WORDS.iter().any(|w| text.contains(&format!("{w} "))) && text.contains("- [") {
                found += 1;
            }
        }
        let after = lookups(&serve.url).await;
        let s = Samples::of(samples);
        println!(
            "memory_search over /mcp, {archives} archives: {} ({} calls, {found} with hits)",
            s.p50_p99(),
            s.n()
        );
        println!(
            "token lookups: {} for {runs} calls ({:.2} per call)",
            after - before,
            (after - before) as f64 / runs as f64
        );
        let _ = client.cancel().await;
    });
}
