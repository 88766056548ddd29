//! The real model (scripts/setup.sh unpacks it into tools/models/). In CI a
//! missing model fails; elsewhere the test says it is missing and passes.

// Tests fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use g2_embed::{Embedder, dot};

fn model() -> Option<Embedder> {
    let dir = std::env::var_os("G2_EMBED_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tools/models/all-minilm-l6-v2")
        });
    match Embedder::load(&dir) {
        Ok(m) => Some(m),
        Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("model not available ({e}); run scripts/setup.sh");
            None
        }
        Err(e) => panic!("the embedding model is needed in CI: {e}"),
    }
}

#[test]
fn meaning_without_shared_words() {
    let Some(m) = model() else { return };
    assert_eq!(m.dims(), 384);
    let v = m
        .embed(&[
            "where is the yacht kept?",
            "the boat is moored at pier 7",
            "I made a lasagne for my sister's birthday",
        ])
        .unwrap();
    for x in &v {
        assert!((dot(x, x) - 1.0).abs() < 1e-4, "unit length");
    }
    let near = dot(&v[0], &v[1]);
    let far = dot(&v[0], &v[2]);
    assert!(near > far + 0.2, "boat {near} vs lasagne {far}");
}

#[test]
fn batches_give_what_single_texts_give() {
    let Some(m) = model() else { return };
    let texts = [
        "short",
        "a much longer sentence that pads the batch to its length",
        "",
    ];
    let batch = m.embed(&texts).unwrap();
    for (t, b) in texts.iter().zip(&batch) {
        let one = m.embed_one(t).unwrap();
        assert!(dot(&one, b) > 0.9999, "{t}: padding changed the vector");
    }
}

#[test]
fn texts_sorted_by_tokens_come_back_in_their_order_at_any_batch_size() {
    let Some(m) = model() else { return };
    // Lengths out of order, one over the token cap, one empty.
    let long = "the tide turns twice a day ".repeat(80);
    let texts = [
        "a much longer sentence that pads the batch to its length",
        "short",
        long.as_str(),
        "",
        "the boat is moored at pier 7",
        "x",
    ];
    let single: Vec<Vec<f32>> = texts.iter().map(|t| m.embed_one(t).unwrap()).collect();
    for batch in [1, 2, 4, 64] {
        let got = m.embed_in(&texts, batch).unwrap();
        assert_eq!(got.len(), texts.len());
        for ((t, g), one) in texts.iter().zip(&got).zip(&single) {
            assert!(
                dot(one, g) > 0.9999,
                "batch {batch}, {t:?}: not its own vector"
            );
        }
    }
}

#[test]
fn mapped_and_read_weights_make_the_same_model() {
    let Some(m) = model() else { return };
    let (read, _) = Embedder::load_timed(m.dir(), g2_embed::Weights::Read).unwrap();
    let text = "where is the yacht kept?";
    let (a, b) = (m.embed_one(text).unwrap(), read.embed_one(text).unwrap());
    assert_eq!(a, b, "the same weights, the same vector");
}
