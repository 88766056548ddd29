//! Recall by meaning with the real embedding model (`scripts/setup.sh`
//! unpacks it; in CI a missing model fails): a question with none of the
//! answer's words, the jobs that embed, forgetting, and group isolation.
//! Everything that installs the process's model is in this one test, so no
//! other test of this binary sees it change.

use g2_host::archives::{Prepared, Trigger};
use g2_host::config::MemorySettings;
use g2_host::memory::embed::{self, Loaded};
use g2_host::memory::{context, recall};
use g2_host::store::{self, Store};

use crate::support::{TestHome, gf, image_ready, project_root, require, serve};

pub fn archive(store: &Store, group: &str, n: usize, day: &str, exchanges: &[(&str, &str)]) {
    let mut body = format!("# Talk {n}\n\nArchived: {day}\n\n---\n\n");
    for (u, a) in exchanges {
        body.push_str(&format!("**User**: {u}\n\n**G2**: {a}\n\n"));
    }
    let p = Prepared {
        group: gf(group),
        session_id: Some(format!("{group}-{n}")),
        title: format!("Talk {n}"),
        file_name: format!("{day}-{n}.md"),
        rel_path: format!("groups/{group}/conversations/{day}-{n}.md"),
        body,
        trigger: Trigger::Manual,
        created_at: format!("{day}T12:00:00.000Z"),
        stats: Default::default(),
        pending: false,
    };
    store
        .write_blocking(move |tx| Ok(store::archives::insert(tx, &p)?.id))
        .unwrap();
}

fn embed_all(store: &Store, model: &embed::Model) -> usize {
    let mut n = 0;
    loop {
        let k = embed::run_once(store, model).unwrap();
        if k == 0 {
            return n;
        }
        n += k;
    }
}

pub fn count(store: &Store, sql: &'static str) -> i64 {
    store
        .read_blocking(move |c| c.query_row(sql, (), |r| r.get(0)))
        .unwrap()
}

#[test]
fn a_question_with_none_of_the_answers_words_is_recalled_by_meaning() {
    let settings = MemorySettings {
        embedding_model: Some(project_root().join(embed::DEFAULT_MODEL)),
        ..Default::default()
    };
    let Loaded::Model(model) = embed::load(&project_root(), &settings) else {
        assert!(!require("the embedding model (tools/models)", false));
        return;
    };
    let home = TestHome::new();
    let store = home.store();
    archive(
        &store,
        "main",
        0,
        "2026-03-01",
        &[
            ("we went sailing on Saturday", "sounds lovely"),
            ("the boat is moored at pier 7", "noted, pier 7"),
            ("I baked sourdough bread", "how did it turn out?"),
        ],
    );
    archive(
        &store,
        "main",
        1,
        "2026-03-02",
        &[
            ("my sister visits in June", "that will be nice"),
            ("the car needs new tyres", "book a garage soon"),
        ],
    );
    // Another group's nearer answer is never seen from main.
    archive(
        &store,
        "fam",
        0,
        "2026-03-03",
        &[("the yacht is kept at berth 12", "ok")],
    );
    let main = gf("main");
    let ask = |q: &'static str| {
        let g = main.clone();
        store
            .read_blocking(move |c| recall::recall(c, &g, q, 5))
            .unwrap()
    };

    // Lexical only (no model): nothing true is found, nothing injected.
    embed::install(None);
    let lexical = ask("where is the yacht kept?");
    assert!(
        lexical.iter().all(|h| !h.snippet.contains("pier 7")),
        "{lexical:#?}"
    );
    let g = main.clone();
    let block = store
        .read_blocking(move |c| context::for_prompt(c, &g, "where is the yacht kept?", 500))
        .unwrap();
    assert_eq!(block, "", "nothing false is injected");

    // Embedded by the jobs, each row once.
    let queued = count(&store, "SELECT count(*) FROM embedding_jobs");
    assert_eq!(queued, 6, "every passage queued");
    assert_eq!(embed_all(&store, &model), 6);
    assert_eq!(embed_all(&store, &model), 0, "nothing is embedded twice");
    assert_eq!(count(&store, "SELECT count(*) FROM embeddings"), 6);

    embed::install(Some(model.clone()));
    let hits = ask("where is the yacht kept?");
    assert!(hits[0].snippet.contains("pier 7"), "{hits:#?}");
    assert_eq!(hits[0].group, "main");
    assert!(
        hits.iter()
            .all(|h| h.group == "main" && !h.snippet.contains("berth 12")),
        "{hits:#?}"
    );

    // Per prompt, the answering turn is handed over, with its day.
    let g = main.clone();
    let block = store
        .read_blocking(move |c| context::for_prompt(c, &g, "where is the yacht kept?", 500))
        .unwrap();
    assert!(
        block.contains("the user: \"the boat is moored at pier 7\"")
            && block.contains("[2026-03-01 p"),
        "{block}"
    );
    assert!(!block.contains("berth 12"), "{block}");
    // A prompt's question made ahead, on a thread of its own beside the
    // agent, is the question the shared pool makes.
    let q = "where do we keep the yacht now?";
    let (_, ahead) = embed::making_ahead(q).wait().expect("a vector");
    let shared = model.embedder.embed_one(q).unwrap();
    let cos = g2_embed::dot(&ahead, &shared);
    assert!(cos > 0.9999, "{cos}");

    // Observations: a restatement supersedes by meaning, something else
    // does not; a forgotten one's vector goes.
    let observe = |title: &'static str| {
        let f = main.clone();
        store
            .write_blocking(move |tx| {
                let draft = g2_host::memory::extract::ObservationDraft {
                    kind: g2_host::memory::extract::Kind::Fact,
                    title: title.into(),
                    narrative: String::new(),
                    facts: vec![],
                    files: vec![],
                    importance: 7,
                    concerns: vec![],
                };
                store::observations::insert(
                    tx,
                    &(&f).into(),
                    &draft,
                    Default::default(),
                    "2026-03-04T10:00:00.000Z",
                    |_| false,
                )
            })
            .unwrap()
    };
    let status = |id: i64| {
        store
            .read_blocking(move |c| {
                c.query_row("SELECT status FROM observations WHERE id = ?1", [id], |r| {
                    r.get::<String>(0)
                })
            })
            .unwrap()
    };
    let first = observe("the dinghy lives in the garage");
    assert_eq!(embed_all(&store, &model), 1);
    let id = observe("the dinghy is kept in the garage");
    let other = observe("the bicycles are kept in the shed");
    assert_eq!(embed_all(&store, &model), 2);
    assert_eq!(status(first), "superseded", "a restatement supersedes it");
    assert_eq!(
        (status(id), status(other)),
        ("active".into(), "active".into())
    );
    let vectors = "SELECT count(*) FROM embeddings WHERE kind = 'observation'";
    assert_eq!(
        count(&store, vectors),
        3,
        "a superseded observation keeps its vector"
    );
    let f = main.clone();
    assert!(
        store
            .write_blocking(move |tx| store::observations::forget(tx, &(&f).into(), id))
            .unwrap()
    );
    assert_eq!(
        count(&store, vectors),
        2,
        "the forgotten observation's vector is gone"
    );
    assert_eq!(
        embed_all(&store, &model),
        0,
        "a forgotten observation is not embedded again"
    );
    embed::install(None);
}

/// Waits until `done` holds, at most `secs`.
fn wait(secs: u64, what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_host_killed_while_embedding_embeds_each_row_once() {
    let model = project_root().join(embed::DEFAULT_MODEL);
    if !require("the embedding model (tools/models)", model.is_dir()) || !image_ready() {
        return;
    }
    let home = TestHome::new();
    let store = home.store();
    for n in 0..40 {
        let exchanges: Vec<(String, String)> = (0..4)
            .map(|k| {
                (
                    format!("note {n}-{k}: the shed key is under stone {k}"),
                    format!("noted {n}-{k}"),
                )
            })
            .collect();
        let refs: Vec<(&str, &str)> = exchanges
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        archive(&store, "main", n, "2026-04-01", &refs);
    }
    let total = count(&store, "SELECT count(*) FROM archive_passages");
    assert_eq!(total, 160);
    // The host stops after storing its first batch; killed there.
    let mut s = serve(&home, &[("FAILPOINTS", "embed-stored=sleep(600000)")]);
    wait(60, "a first batch stored", || {
        count(&store, "SELECT count(*) FROM embeddings") > 0
    });
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let stored = count(&store, "SELECT count(*) FROM embeddings");
    assert!(stored < total, "the kill came mid-way: {stored} of {total}");
    assert_eq!(
        count(&store, "SELECT count(*) FROM embedding_jobs"),
        total - stored
    );
    // Back up: the rest is embedded, and nothing twice (a vector stored
    // again would have taken a new rowid).
    let _s = serve(&home, &[]);
    wait(120, "every passage embedded", || {
        count(&store, "SELECT count(*) FROM embedding_jobs") == 0
    });
    assert_eq!(count(&store, "SELECT count(*) FROM embeddings"), total);
    assert_eq!(count(&store, "SELECT max(rowid) FROM embeddings"), total);
}
