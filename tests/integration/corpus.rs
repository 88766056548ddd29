//! Replays the committed fuzz corpora (`fuzz/corpus/{target}/*`) through
//! the fuzz targets' own bodies (`fuzz/src/lib.rs`), so every input the
//! fuzzer found interesting, crashes that were fixed included, is checked by
//! the normal tests without libFuzzer.

#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::path::Path;

#[test]
fn every_corpus_file_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    for (name, check) in targets::TARGETS {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: an empty corpus");
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            let check = *check;
            // Debug builds use far more stack per frame than the release
            // build the fuzzer ran: deeply nested trigger patterns in
            // `api_body` inputs need more than a test thread's 2 MiB.
            let run = std::thread::Builder::new()
                .stack_size(64 << 20)
                .spawn(move || check(&bytes))
                .unwrap();
            if let Err(e) = run.join() {
                let why = e
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or(e.downcast_ref::<&str>().copied())
                    .unwrap_or("");
                panic!("{name}: {} fails: {why}", f.display());
            }
        }
        eprintln!("{name}: {} inputs", files.len());
    }
}
