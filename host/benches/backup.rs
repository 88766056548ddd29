//! `g2 backup` and `g2 restore` as processes on a home with
//! `G2_BENCH_ARCHIVES` archives (default 10,000) of 20 exchanges each in
//! group `main`, generated from a seeded PRNG: files in
//! `groups/main/conversations/` and their rows and index in the store
//! (docs/backup.md, "Measured").
//!
//! `G2_BENCH_RUNS` (default 3) backups, each restored into a fresh home:
//! the median and the slowest of each, the backup's size against the
//! home's (store + groups/).
//!
//! `cargo bench --workspace --bench backup`, or with the test build's `g2`:
//! `G2_BIN=target/debug/g2 cargo bench --workspace --bench backup`.

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{command, env_or, g2_binary, init_home, word_archives};

fn bytes_under(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .unwrap()
        .map(|e| bytes_under(&e.unwrap().path()))
        .sum()
}

fn g2_timed(home: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    let out = command(g2_binary())
        .arg("--home")
        .arg(home)
        .args(args)
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(
        out.status.success(),
        "g2 {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1_048_576.0)
}

fn main() {
    let archives: usize = env_or("G2_BENCH_ARCHIVES", 10_000);
    let runs: usize = env_or("G2_BENCH_RUNS", 3);
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    init_home(&home);
    let t = Instant::now();
    word_archives(&home, archives);
    let size = bytes_under(&home.join("data/g2.db")) + bytes_under(&home.join("groups"));
    println!(
        "home: {archives} archives, store + groups/ {} (generated in {:.1} s)",
        mb(size),
        t.elapsed().as_secs_f64()
    );
    let (mut backups, mut restores, mut file_size) = (Vec::new(), Vec::new(), 0);
    for run in 0..runs {
        let file = dir.path().join(format!("b{run}.tar.zst"));
        backups.push(g2_timed(&home, &["backup", file.to_str().unwrap()]));
        file_size = std::fs::metadata(&file).unwrap().len();
        let target = dir.path().join(format!("r{run}"));
        restores.push(g2_timed(&target, &["restore", file.to_str().unwrap()]));
        std::fs::remove_dir_all(&target).unwrap();
        std::fs::remove_file(&file).unwrap();
    }
    backups.sort();
    restores.sort();
    let line = |what: &str, v: &[Duration]| {
        println!(
            "  {what:<8} median {:>6.2} s  slowest {:>6.2} s",
            v[v.len() / 2].as_secs_f64(),
            v[v.len() - 1].as_secs_f64()
        );
    };
    line("backup", &backups);
    line("restore", &restores);
    println!(
        "  file     {} ({:.0}% of the home's {})",
        mb(file_size),
        100.0 * file_size as f64 / size as f64,
        mb(size)
    );
}
