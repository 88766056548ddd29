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

use crate::support::{TestHome, gf, project_root, require};

fn archive(store: &Store, group: &str, n: usize, day: &str, exchanges: &[(&str, &str)]) {
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

fn count(store: &Store, sql: &'static str) -> i64 {
    store
        .read_blocking(move |c| Ok(c.query_row(sql, [], |r| r.get(0))?))
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

    // An observation's vector goes when it is forgotten.
    let f = main.clone();
    let id = store
        .write_blocking(move |tx| {
            let draft = g2_host::memory::extract::ObservationDraft {
                kind: g2_host::memory::extract::Kind::Fact,
                title: "the dinghy lives in the garage".into(),
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
        .unwrap();
    assert_eq!(embed_all(&store, &model), 1);
    let vectors = "SELECT count(*) FROM embeddings WHERE kind = 'observation'";
    assert_eq!(count(&store, vectors), 1);
    let f = main.clone();
    assert!(
        store
            .write_blocking(move |tx| store::observations::forget(tx, &(&f).into(), id))
            .unwrap()
    );
    assert_eq!(
        count(&store, vectors),
        0,
        "the forgotten observation's vector is gone"
    );
    assert_eq!(
        embed_all(&store, &model),
        0,
        "a forgotten observation is not embedded again"
    );
    embed::install(None);
}
