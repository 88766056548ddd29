//! `g2 search` latency over 10,000 archives, against `grep -ril`.
//!
//! Builds a temporary home holding 10,000 generated markdown archives of
//! about 20 KB each (200 MB) in the archive format (`# Title`, `Archived:`,
//! `---`, `**User**: …`, `**G2**: …`), written to
//! `groups/main/conversations/` and indexed in the database with the same
//! rows as `store::archives::insert` (`conversation_archives` + `archives_fts`),
//! in a few large transactions. The text is deterministic: a seeded
//! xorshift PRNG draws words from a Zipf-distributed vocabulary (common
//! English words first, then generated ones), and a few marker terms are
//! planted in a chosen number of documents (about 10, 1,000 and 9,000) so
//! that terms of known document frequency exist. Marker terms use letters
//! the vocabulary never does, so `grep` (a substring match) finds exactly
//! the same files as FTS5.
//!
//! Then, per term:
//! - in-process `search::search(conn, term, None, 10)`: warm-up, then 1,000
//!   queries (fewer when a term is so slow that 1,000 would exceed the time
//!   cap; `n` is printed), p50 / p99;
//! - the same with a group filter: `Some("main")` (the group of every
//!   archive: the filter refuses nothing) and `Some("nobody")` (a group
//!   without archives: every match is found and refused);
//! - the whole process `g2 --home DIR search TERM --limit 10`: 100 runs,
//!   p50 / p99 (and `g2 --version` as the process floor), and the same with
//!   `--group main`;
//! - `grep -ril TERM groups/main/conversations`: 10 runs, median.
//!
//! It also prints the best hit's snippet per term, as a sanity check.
//!
//! The page cache is warm for both sides (the files were just written, and
//! the database is read on every query); nothing here drops caches.
//! Goal: p50 under 5 ms, at least 100x faster than grep.
//!
//! Run: `cargo bench -p g2-host --bench search` (Cargo builds the `g2`
//! binary with the bench, as `target/release/g2`; `$G2_BIN` names another
//! binary). The generated home is a temp dir,
//! removed at the end; set `G2_BENCH_HOME=/some/empty/dir` to keep it (a
//! later run with the same folder reuses it). Takes about 3-5 minutes on 2
//! cores (less with a reused corpus).

// Tests and benches fail loudly: an unwrap is the assertion.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Samples, command, fmt_dur, g2_binary, time_process};

use chrono::{TimeZone, Utc};
use g2_host::store::params;

use g2_host::home::Home;
use g2_host::search;
use g2_host::store::Store;

/// The generated corpus.
struct Corpus {
    /// Archives.
    docs: usize,
    /// Bytes of each archive, about.
    doc_bytes: usize,
    /// Distinct words drawn from.
    vocab: usize,
    /// Archives written per transaction.
    batch: usize,
    /// The PRNG's seed: the same text every run.
    seed: u64,
}

const CORPUS: Corpus = Corpus {
    docs: 10_000,
    doc_bytes: 20_000,
    vocab: 5_000,
    batch: 2_500,
    seed: 0x6732_5f62_656e_6368,
};

/// How many times each side is timed.
struct Runs {
    /// In-process queries per term, at most.
    queries: usize,
    /// Time spent on a term's in-process queries, at most.
    query_time_cap: Duration,
    /// `g2 search` processes per term.
    cli: usize,
    /// `grep -ril` runs per term.
    grep: usize,
}

const RUNS: Runs = Runs {
    queries: 1_000,
    query_time_cap: Duration::from_secs(20),
    cli: 100,
    grep: 10,
};

/// Planted marker terms: (term, in how many documents, how it is chosen).
const RARE: &str = "quorzal";
const MEDIUM: &str = "vexquill";
const COMMON: &str = "zinthex";

/// Common English words, most frequent first (none holds q, x or z).
const ENGLISH: &[&str] = &[
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on",
    "are", "with", "as", "i", "his", "they", "be", "at", "one", "have", "this", "from", "or",
    "had", "by", "not", "word", "but", "what", "some", "we", "can", "out", "other", "were", "all",
    "there", "when", "up", "use", "your", "how", "said", "an", "each", "she", "which", "do",
    "their", "time", "if", "will", "way", "about", "many", "then", "them", "write", "would",
    "like", "so", "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look",
    "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my",
    "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been", "now",
    "find", "file", "test", "build", "error", "search", "archive", "session", "group", "memory",
    "agent", "message", "server", "config", "release", "branch", "commit", "deploy", "budget",
    "invoice", "research", "meeting", "schedule", "report",
];

fn main() {
    let g2 = g2_binary();
    let started = Instant::now();
    // `$G2_BENCH_HOME` keeps the corpus for poking at afterwards (and
    // reuses it when it is already there); by default it is a temp dir.
    let kept = std::env::var_os("G2_BENCH_HOME").map(PathBuf::from);
    let tmp = match &kept {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("g2-search-bench")
                .tempdir()
                .expect("tempdir"),
        ),
    };
    let root = kept
        .clone()
        .unwrap_or_else(|| tmp.as_ref().unwrap().path().to_path_buf());
    let home = Home::new(&root).unwrap();
    home.ensure_layout().unwrap();
    let main = g2_core::validate::GroupFolder::new("main").unwrap();
    home.ensure_group(&main, "Main", true).unwrap();
    let store = Store::open(&home.db_path(), Duration::from_secs(5)).unwrap();

    println!("search bench");
    println!(
        "  home     {} ({})",
        home.root().display(),
        if kept.is_some() {
            "kept: $G2_BENCH_HOME"
        } else {
            "temp, removed at the end"
        }
    );
    println!("  g2       {}", g2.display());
    println!(
        "  cores    {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    println!(
        "  locale   LANG={} LC_ALL={}",
        std::env::var("LANG").unwrap_or_default(),
        std::env::var("LC_ALL").unwrap_or_default()
    );

    let existing: i64 = store
        .read_blocking(|c| {
            c.query_row("SELECT count(*) FROM conversation_archives", (), |r| {
                r.get(0)
            })
        })
        .unwrap();
    if existing == CORPUS.docs as i64 {
        println!("  corpus   {} archives already there, reused", CORPUS.docs);
    } else {
        assert_eq!(
            existing,
            0,
            "{} holds other archives; use an empty folder",
            home.root().display()
        );
        let gen_stats = generate(&home, &store);
        println!(
            "  corpus   {} archives, {:.1} MB of markdown (mean {} bytes), written in {:.1} s, indexed in {:.1} s",
            CORPUS.docs,
            gen_stats.bytes as f64 / 1e6,
            gen_stats.bytes / CORPUS.docs as u64,
            gen_stats.write_time.as_secs_f64(),
            gen_stats.index_time.as_secs_f64()
        );
    }
    let db_bytes = std::fs::metadata(home.db_path()).map_or(0, |m| m.len())
        + std::fs::metadata(home.db_path().with_extension("db-wal")).map_or(0, |m| m.len());
    println!("  database {:.1} MB (with WAL)", db_bytes as f64 / 1e6);
    println!();

    let terms: Vec<(&str, String)> = vec![
        ("rare (planted)", RARE.to_string()),
        ("medium (planted)", MEDIUM.to_string()),
        ("common (planted)", COMMON.to_string()),
        ("top Zipf word", "the".to_string()),
        ("two words (AND)", format!("{MEDIUM} {COMMON}")),
    ];

    // Document frequency as FTS5 sees it, and the in-process latencies:
    // without a group, with the group holding every archive, and with a
    // group holding none (every match is found and refused).
    let in_proc: Vec<InProcess> = store
        .read_blocking(|conn| {
            let mut out = Vec::new();
            for (_, term) in &terms {
                let fts = search::fts_query(term).unwrap();
                let df: i64 = conn.query_row(
                    "SELECT count(*) FROM archives_fts WHERE archives_fts MATCH ?1",
                    [&fts],
                    |r| r.get(0),
                )?;
                let top = search::search(conn, term, None, 10)?;
                out.push(InProcess {
                    df,
                    snippet: top.first().map(|h| h.snippet.clone()).unwrap_or_default(),
                    all: time_search(conn, term, None)?,
                    group_all: time_search(conn, term, Some("main"))?,
                    group_none: time_search(conn, term, Some(NO_ARCHIVES))?,
                });
            }
            Ok(out)
        })
        .expect("in-process search");

    // Process floors: start-up alone, and start-up + settings + store open
    // + a search that matches nothing.
    let floor = time_process(RUNS.cli, &[0], || {
        let mut c = command(&g2);
        c.arg("--version");
        c
    });
    let floor_empty = time_process(RUNS.cli, &[0], || {
        let mut c = command(&g2);
        c.arg("--home")
            .arg(home.root())
            .args(["search", "qqqnomatch", "--limit", "10"]);
        c
    });
    let cli = |term: &str, group: Option<&str>| {
        time_process(RUNS.cli, &[0], || {
            let mut c = command(&g2);
            c.arg("--home").arg(home.root()).arg("search");
            c.args(term.split(' '));
            c.args(["--limit", "10"]);
            if let Some(g) = group {
                c.args(["--group", g]);
            }
            c
        })
    };
    let cli_all: Vec<Samples> = terms.iter().map(|(_, term)| cli(term, None)).collect();
    let cli_group: Vec<Samples> = terms
        .iter()
        .map(|(_, term)| cli(term, Some("main")))
        .collect();

    let conv = "groups/main/conversations";
    let grep: Vec<Option<(usize, Samples)>> = terms
        .iter()
        .map(|(_, term)| {
            if term.contains(' ') {
                return None;
            }
            let out = command("grep")
                .args(["-ril", term, conv])
                .current_dir(home.root())
                .output()
                .expect("grep (is it installed?)");
            let files = out
                .stdout
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            let q = time_process(RUNS.grep, &[0, 1], || {
                let mut c = command("grep");
                c.args(["-ril", term, conv]).current_dir(home.root());
                c
            });
            Some((files, q))
        })
        .collect();

    println!(
        "{:<18} {:<18} {:>6} {:>6} | {:>22} | {:>18} | {:>10} {:>6} | {:>8} {:>8}",
        "term",
        "kind",
        "docs",
        "grep",
        "in-process p50/p99 (n)",
        "CLI p50/p99",
        "grep med",
        "(n)",
        "grep/in",
        "grep/CLI"
    );
    let mut p50_ok = true;
    let mut speedup_ok = true;
    for (i, (kind, term)) in terms.iter().enumerate() {
        let q = &in_proc[i].all;
        let c = &cli_all[i];
        let (grep_files, grep_med, x_in, x_cli) = match &grep[i] {
            Some((files, g)) => {
                let x_in = g.at(0.5).as_secs_f64() / q.at(0.5).as_secs_f64();
                let x_cli = g.at(0.5).as_secs_f64() / c.at(0.5).as_secs_f64();
                speedup_ok &= x_in >= 100.0;
                (
                    files.to_string(),
                    fmt_dur(g.at(0.5)),
                    fmt_ratio(x_in),
                    fmt_ratio(x_cli),
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        p50_ok &= q.at(0.5) < Duration::from_millis(5);
        println!(
            "{:<18} {:<18} {:>6} {:>6} | {:>22} | {:>18} | {:>10} {:>6} | {:>8} {:>8}",
            term,
            kind,
            in_proc[i].df,
            grep_files,
            p50_p99_n(q),
            p50_p99(c),
            grep_med,
            format!("({})", grep[i].as_ref().map_or(0, |g| g.1.n())),
            x_in,
            x_cli
        );
    }
    println!(
        "process floor: `g2 --version` p50 / p99 {}; `g2 search` with no match p50 / p99 {} (n={})",
        p50_p99(&floor),
        p50_p99(&floor_empty),
        floor.n()
    );
    println!(
        "(CLI rows: n={} each; docs = FTS5 match count; grep = files grep -ril lists)",
        RUNS.cli
    );
    println!();

    println!(
        "with a group filter (`--group main` holds every archive, `--group {NO_ARCHIVES}` none):"
    );
    println!(
        "{:<18} | {:>24} | {:>24} | {:>20}",
        "term", "in-proc main p50/p99 (n)", "in-proc none p50/p99 (n)", "CLI main p50/p99"
    );
    for (i, (_, term)) in terms.iter().enumerate() {
        println!(
            "{:<18} | {:>24} | {:>24} | {:>20}",
            term,
            p50_p99_n(&in_proc[i].group_all),
            p50_p99_n(&in_proc[i].group_none),
            p50_p99(&cli_group[i])
        );
    }
    println!();
    println!("top hit's snippet per term:");
    for (i, (_, term)) in terms.iter().enumerate() {
        println!("  {term:<18} {}", in_proc[i].snippet);
    }
    println!();
    println!(
        "goal p50 < 5 ms (in-process, every term): {}",
        if p50_ok { "MET" } else { "MISSED" }
    );
    println!(
        "goal >= 100x faster than grep (in-process p50): {}",
        if speedup_ok { "MET" } else { "MISSED" }
    );

    drop(store);
    if let Some(tmp) = tmp {
        tmp.close().expect("removing the temp home");
    }
    println!("total bench time {:.0} s", started.elapsed().as_secs_f64());
}

/// xorshift64*: small, seeded, good enough for text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Words by rank, and the cumulative Zipf (s = 1) weights to draw them.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new(rng: &mut Rng) -> Self {
        const ONSETS: &[&str] = &[
            "b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "tr",
            "st", "pl", "gr", "sh", "ch", "th",
        ];
        const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ea", "ou"];
        const CODAS: &[&str] = &["", "", "n", "r", "l", "s", "t", "m", "nd", "rk"];
        let mut seen: HashSet<String> = ENGLISH.iter().map(ToString::to_string).collect();
        let mut words: Vec<String> = ENGLISH.iter().map(ToString::to_string).collect();
        while words.len() < CORPUS.vocab {
            let syllables = 1 + rng.below(3);
            let mut w = String::new();
            for _ in 0..syllables {
                w.push_str(ONSETS[rng.below(ONSETS.len())]);
                w.push_str(VOWELS[rng.below(VOWELS.len())]);
                w.push_str(CODAS[rng.below(CODAS.len())]);
            }
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        for w in &words {
            assert!(
                !w.contains(['q', 'x', 'z']),
                "vocabulary word {w:?} would collide with the planted terms"
            );
        }
        let mut total = 0.0;
        let cumulative = (0..words.len())
            .map(|r| {
                total += 1.0 / (r + 1) as f64;
                total
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    fn draw(&self, rng: &mut Rng) -> &str {
        let total = *self.cumulative.last().unwrap();
        let u = rng.unit() * total;
        let i = self
            .cumulative
            .partition_point(|&c| c <= u)
            .min(self.words.len() - 1);
        &self.words[i]
    }
}

struct GenStats {
    bytes: u64,
    write_time: Duration,
    index_time: Duration,
}

/// Writes the archives and indexes them, `CORPUS.batch` per transaction.
fn generate(home: &Home, store: &Store) -> GenStats {
    let mut rng = Rng(CORPUS.seed);
    let vocab = Vocabulary::new(&mut rng);
    let dir = home
        .conversations_dir(&g2_core::validate::GroupFolder::new("main").unwrap())
        .unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    // Exactly 10 documents get the rare term, spread over the corpus.
    let rare_docs: HashSet<usize> = (0..10).map(|i| i * (CORPUS.docs / 10) + 7).collect();
    let base = Utc.with_ymd_and_hms(2025, 1, 1, 9, 0, 0).unwrap();
    let triggers = ["clear", "precompact", "manual"];

    let mut stats = GenStats {
        bytes: 0,
        write_time: Duration::ZERO,
        index_time: Duration::ZERO,
    };
    let mut batch: Vec<(String, String, String, String, String, String)> =
        Vec::with_capacity(CORPUS.batch);
    for i in 0..CORPUS.docs {
        let t0 = Instant::now();
        let at = base + chrono::Duration::minutes(53 * i as i64);
        let mut planted: Vec<&str> = Vec::new();
        if rare_docs.contains(&i) {
            planted.push(RARE);
        }
        if rng.unit() < 0.10 {
            planted.extend(std::iter::repeat_n(MEDIUM, 1 + rng.below(3)));
        }
        if rng.unit() < 0.90 {
            planted.extend(std::iter::repeat_n(COMMON, 1 + rng.below(5)));
        }
        let (title, body) = document(&mut rng, &vocab, &at, &planted);
        let slug: String = title
            .to_lowercase()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("-");
        let rel = format!(
            "groups/main/conversations/{}-{slug}-{i}.md",
            at.format("%Y-%m-%d")
        );
        std::fs::write(home.root().join(&rel), &body).unwrap();
        stats.bytes += body.len() as u64;
        let session = format!("{:016x}-{:04x}", rng.next(), i);
        let created = at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        batch.push((
            title,
            body,
            rel,
            session,
            triggers[i % 3].to_string(),
            created,
        ));
        stats.write_time += t0.elapsed();

        if batch.len() == CORPUS.batch || i + 1 == CORPUS.docs {
            let t1 = Instant::now();
            let rows = std::mem::take(&mut batch);
            store
                .write_blocking(move |tx| {
                    for (title, body, rel, session, trigger, created) in &rows {
                        let id: i64 = tx.query_row(
                            "INSERT INTO conversation_archives (group_folder, session_id, name, path, trigger, created_at)
                             VALUES ('main', ?1, ?2, ?3, ?4, ?5) RETURNING id",
                            params![session, title, rel, trigger, created],
                            |r| r.get(0),
                        )?;
                        tx.execute(
                            "INSERT INTO archives_fts (rowid, name, body) VALUES (?1, ?2, ?3)",
                            params![id, title, body],
                        )?;
                    }
                    Ok(())
                })
                .expect("indexing a batch");
            stats.index_time += t1.elapsed();
        }
    }
    stats
}

/// One archive: its title and markdown, `planted` words placed at random
/// positions among the first ~2,000 words.
fn document(
    rng: &mut Rng,
    vocab: &Vocabulary,
    at: &chrono::DateTime<Utc>,
    planted: &[&str],
) -> (String, String) {
    let title_words = 2 + rng.below(5);
    let mut title = String::new();
    for k in 0..title_words {
        if k > 0 {
            title.push(' ');
        }
        let w = vocab.words[20 + rng.below(2000)].clone();
        title.push_str(&if k == 0 { capitalize(&w) } else { w });
    }
    let mut positions: Vec<(usize, &str)> = planted.iter().map(|t| (rng.below(2000), *t)).collect();
    positions.sort();
    let mut next_planted = positions.into_iter().peekable();

    let mut out = String::with_capacity(CORPUS.doc_bytes + 1024);
    out.push_str("# ");
    out.push_str(&title);
    out.push_str("\n\nArchived: ");
    out.push_str(&at.format("%b %-d, %Y, %-I:%M %p").to_string());
    out.push_str("\n\n---\n\n");
    let mut word_index = 0usize;
    let mut user = true;
    while out.len() < CORPUS.doc_bytes {
        out.push_str(if user { "**User**: " } else { "**G2**: " });
        let sentences = if user {
            1 + rng.below(3)
        } else {
            2 + rng.below(8)
        };
        for s in 0..sentences {
            if s > 0 {
                out.push(' ');
            }
            let len = 6 + rng.below(14);
            for k in 0..len {
                let w = match next_planted.peek() {
                    Some(&(pos, t)) if pos <= word_index => {
                        next_planted.next();
                        t
                    }
                    _ => vocab.draw(rng),
                };
                word_index += 1;
                if k == 0 {
                    out.push_str(&capitalize(w));
                } else {
                    out.push(' ');
                    out.push_str(w);
                }
            }
            out.push(if rng.below(6) == 0 { '?' } else { '.' });
        }
        out.push_str("\n\n");
        user = !user;
    }
    // Any planted word not placed yet (a very short document) goes last.
    for (_, t) in next_planted {
        out.push_str(t);
        out.push_str(".\n\n");
    }
    (title, out)
}

fn capitalize(w: &str) -> String {
    let mut c = w.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn fmt_ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}x")
    } else {
        format!("{x:.1}x")
    }
}

/// A group folder no archive of the corpus is in.
const NO_ARCHIVES: &str = "nobody";

/// One term's in-process measurements.
struct InProcess {
    /// FTS5 match count.
    df: i64,
    /// The best hit's snippet.
    snippet: String,
    /// No group filter.
    all: Samples,
    /// `main`: every archive.
    group_all: Samples,
    /// [`NO_ARCHIVES`]: no archive.
    group_none: Samples,
}

/// `search::search(conn, term, group, 10)`: 20 warm-up queries, then
/// `RUNS.queries` timed ones, or fewer (at least 100) once `RUNS.query_time_cap` has
/// passed.
fn time_search(
    conn: &g2_host::store::Db<'_>,
    term: &str,
    group: Option<&str>,
) -> g2_host::Result<Samples> {
    for _ in 0..20 {
        std::hint::black_box(search::search(conn, term, group, 10)?);
    }
    let mut samples = Vec::with_capacity(RUNS.queries);
    let cap = Instant::now();
    while samples.len() < RUNS.queries
        && (samples.len() < 100 || cap.elapsed() < RUNS.query_time_cap)
    {
        let t = Instant::now();
        std::hint::black_box(search::search(conn, term, group, 10)?);
        samples.push(t.elapsed());
    }
    Ok(Samples::of(samples))
}

fn p50_p99(s: &Samples) -> String {
    format!("{} / {}", fmt_dur(s.at(0.5)), fmt_dur(s.at(0.99)))
}

fn p50_p99_n(s: &Samples) -> String {
    format!("{} ({})", p50_p99(s), s.n())
}
