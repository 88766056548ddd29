//! `g2 memory search` asks a running `g2 serve` (`GET /api/memory/search`),
//! which holds the embedding model loaded, and recalls in its own process
//! when none runs: the two print the same, byte for byte.

use std::process::Output;

use crate::meaning::archive;
use crate::support::*;

/// What a person sees: the exit status, stdout and stderr.
fn seen(out: &Output) -> (bool, String, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn memory_search_prints_the_same_with_a_host_running_as_without() {
    let model = project_root().join(g2_host::memory::embed::DEFAULT_MODEL);
    if !require("the embedding model (tools/models)", model.is_dir()) || !image_ready() {
        return;
    }
    let home = home_with_family();
    let store = home.store();
    archive(
        &store,
        "main",
        1,
        "2026-04-01",
        &[("the boat is moored at pier 7", "noted")],
    );
    archive(
        &store,
        "main",
        2,
        "2026-04-02",
        &[("we bake lasagne on Sundays", "yum")],
    );
    archive(
        &store,
        "family",
        3,
        "2026-04-03",
        &[("the yacht club meets on Friday", "ok")],
    );
    home.ok(&[
        "memory",
        "remember",
        "global",
        "the spare key is under the blue pot",
    ]);
    // The reindex embeds every row, and says how far it got.
    let reindexed = home.ok(&["memory", "reindex"]);
    assert!(reindexed.contains("embedded: "), "{reindexed}");
    assert_eq!(
        crate::meaning::count(&store, "SELECT count(*) FROM embedding_jobs"),
        0
    );

    let long = format!("where is the boat {}", "kept ".repeat(300));
    let asks: Vec<Vec<&str>> = vec![
        vec!["memory", "search", "where", "is", "the", "yacht", "kept?"],
        vec![
            "memory", "search", "where", "is", "the", "yacht", "kept?", "--json",
        ],
        vec![
            "memory", "search", "boat", "--group", "main", "--limit", "1",
        ],
        vec![
            "memory",
            "search",
            "spare key",
            "--group",
            "family",
            "--json",
        ],
        vec!["memory", "search", &long, "--json"],
        vec!["memory", "search", "qqqnothing"],
        vec!["memory", "search", "boat", "--group", "nobody"],
    ];
    let here: Vec<_> = asks.iter().map(|a| seen(&home.g2(a))).collect();
    assert!(
        here[0].1.contains("[passage"),
        "recalled here: {}",
        here[0].1
    );
    assert!(
        here[4].2.contains("note: "),
        "the long question is cut: {}",
        here[4].2
    );
    assert!(!here[6].0, "an unknown group is refused");

    let s = serve(&home, &[]);
    let through_host: Vec<_> = asks.iter().map(|a| seen(&home.g2(a))).collect();
    for ((a, h), t) in asks.iter().zip(&here).zip(&through_host) {
        if h == t {
            continue;
        }
        // A score may differ in its last bit (the question's vector is
        // made in another process); nothing else may.
        assert!(
            a.contains(&"--json"),
            "g2 {a:?}: printed otherwise with a host running"
        );
        assert_eq!((h.0, &h.2), (t.0, &t.2), "g2 {a:?}");
        let (mut x, mut y): (serde_json::Value, serde_json::Value) = (
            serde_json::from_str(&h.1).unwrap(),
            serde_json::from_str(&t.1).unwrap(),
        );
        for (p, q) in x
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .zip(y.as_array_mut().unwrap())
        {
            let (ps, qs) = (p["score"].as_f64().unwrap(), q["score"].as_f64().unwrap());
            assert!((ps - qs).abs() < 1e-12, "g2 {a:?}: scores {ps} and {qs}");
            p["score"] = serde_json::Value::Null;
            q["score"] = serde_json::Value::Null;
        }
        assert_eq!(x, y, "g2 {a:?}: printed otherwise with a host running");
    }
    // And it was the host that answered: the CLI says when it falls back.
    let out = home.g2_with(
        &["memory", "search", "boat"],
        &[("G2_LOG", "g2_host=debug")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("recalling here"),
        "{err}"
    );
    assert!(
        !err.contains("embedding model loaded"),
        "the CLI loaded the model: {err}"
    );

    // The route itself: the CLI's JSON, the cut question's header, bad input.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = http_client();
        let url = format!("{}/api/memory/search?q=where+is+the+yacht+kept%3F", s.url);
        let api: serde_json::Value = c.get(&url).send().await.unwrap().json().await.unwrap();
        let cli: serde_json::Value = serde_json::from_str(&through_host[1].1).unwrap();
        assert_eq!(api, cli);
        let q: String = url::form_urlencoded::byte_serialize(long.as_bytes()).collect();
        let r = c
            .get(format!("{}/api/memory/search?q={q}", s.url))
            .send()
            .await
            .unwrap();
        assert!(r.headers().contains_key("g2-query-ignored-words"));
        for (query, status) in [
            ("q=boat&group=nobody", 404),
            ("q=boat&group=..", 400),
            ("q=boat&sort=x", 400),
            ("limit=3", 400),
        ] {
            let r = c
                .get(format!("{}/api/memory/search?{query}", s.url))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), status, "{query}");
        }
    });
}

#[test]
fn without_vectors_in_scope_the_model_is_not_loaded() {
    let home = TestHome::new();
    archive(
        &home.store(),
        "main",
        1,
        "2026-04-01",
        &[("the boat is at pier 7", "noted")],
    );
    // Queued but not embedded: recall is lexical, and the model stays unread.
    let out = home.g2_with(&["memory", "search", "boat"], &[("G2_LOG", "g2_host=info")]);
    let (ok, stdout, stderr) = seen(&out);
    assert!(ok && stdout.contains("pier 7"), "{stdout}{stderr}");
    assert!(!stderr.contains("embedding model loaded"), "{stderr}");
}
