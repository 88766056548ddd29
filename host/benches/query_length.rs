//! What a query costs against its length: archive search
//! (`search::search`) and recall by words (`memory::recall::recall`,
//! embeddings off) over one group of 60 archived exchanges, for queries
//! of 10 to 10,000 words (distinct content words, the first two found in
//! the archives): p50 over `G2_BENCH_RUNS` (default 20) runs each. A query
//! is read up to its 64th content word (`search::question::cap`), so the
//! cost grows only with reading the rest, linearly.
//!
//! `cargo bench -p g2-host --bench query_length`

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Samples, bench_store, day_archive, env_or, fmt_dur};
use g2_core::validate::GroupFolder;

fn main() {
    let runs: usize = env_or("G2_BENCH_RUNS", 20);
    let dir = tempfile::tempdir().unwrap();
    let store = bench_store(dir.path());
    let filler = "we talked about many other things that day. ".repeat(10);
    let archives: Vec<_> = (0..60)
        .map(|i| {
            day_archive(
                i,
                format!(
                    "**User**: the wombat slept by pier {i}. {filler}\n\n**G2**: noted, pier {i}."
                ),
            )
        })
        .collect();
    store
        .write_blocking(move |tx| {
            for a in &archives {
                g2_host::store::archives::insert(tx, a)?;
            }
            Ok(())
        })
        .unwrap();
    let main = GroupFolder::new("main").unwrap();
    println!(
        "query length: search and recall (words only) over 60 archived exchanges, p50 of {runs}"
    );
    for words in [10usize, 100, 1_000, 2_000, 5_000, 10_000] {
        let tail: Vec<String> = (0..words - 2).map(|i| format!("x{i:x}q")).collect();
        let query = format!("wombat pier {}", tail.join(" "));
        let time = |f: &dyn Fn() -> usize| -> (Duration, usize) {
            let found = f();
            let mut s = Vec::with_capacity(runs);
            for _ in 0..runs {
                let t = Instant::now();
                f();
                s.push(t.elapsed());
            }
            (Samples::of(s).at(0.5), found)
        };
        let (search, hits) = time(&|| {
            store
                .read_blocking(|c| g2_host::search::search(c, &query, Some("main"), 10))
                .unwrap()
                .len()
        });
        let (recall, recalled) = time(&|| {
            store
                .read_blocking(|c| g2_host::memory::recall::recall(c, &main, &query, 10))
                .unwrap()
                .len()
        });
        assert!(hits > 0 && recalled > 0, "the archives answer the query");
        println!(
            "  {words:>6} words ({:>6} bytes)  search p50 {:>9}  recall p50 {:>9}",
            query.len(),
            fmt_dur(search),
            fmt_dur(recall)
        );
    }
}
