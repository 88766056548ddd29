//! What the rankings scored on one data set, in all and by the
//! questions' kind, and how it is printed.

use std::collections::BTreeMap;

use super::data::Dataset;
use super::layout::{Layout, Views};
use super::rank::{GATES, INJECTIONS};

/// The ranking that does not rank passages (no "turn" figure), and ranks
/// archives (no figure at all when an archive holds many sessions).
const ARCHIVES: &str = "g2 search (archives)";
/// The shipped injection: 8 hits of 200 characters a message (its index
/// in `INJECTIONS`), gated at 0.25 / 0.2 (in `GATES`).
const SHIPPED: (usize, usize) = (3, 3);

#[derive(Default, Clone)]
pub struct Tally {
    pub n: usize,
    pub first: usize,
    pub top5: usize,
    pub turn5: usize,
}

impl Tally {
    fn add(&mut self, rank: Option<usize>, turn: bool) {
        self.n += 1;
        self.first += usize::from(rank == Some(0));
        self.top5 += usize::from(rank.is_some_and(|r| r < 5));
        self.turn5 += usize::from(turn);
    }

    fn pct(&self, k: usize) -> String {
        pct(k, self.n)
    }
}

fn pct(k: usize, n: usize) -> String {
    format!("{:5.1}%", 100.0 * k as f64 / n.max(1) as f64)
}

/// The questions of one kind (or all): each ranking's tally, and for each
/// injection and gate how many blocks held an answering turn.
#[derive(Clone)]
pub struct Kind {
    pub tallies: Vec<Tally>,
    pub held: Vec<[usize; GATES.len()]>,
}

impl Kind {
    fn new(rankings: usize) -> Kind {
        Kind {
            tallies: vec![Tally::default(); rankings],
            held: vec![[0; GATES.len()]; INJECTIONS.len()],
        }
    }

    fn n(&self) -> usize {
        self.tallies.first().map_or(0, |t| t.n)
    }
}

pub struct Report {
    title: String,
    layout: Layout,
    names: Vec<String>,
    all: Kind,
    kinds: BTreeMap<String, Kind>,
    /// Per injection and gate: unrelated prompts given a block, and the
    /// questions' characters injected.
    pub noisy: Vec<[usize; GATES.len()]>,
    pub chars: Vec<[usize; GATES.len()]>,
    pub unrelated_n: usize,
    pub top_scores: Vec<f64>,
    pub unrelated_top: Vec<f64>,
}

impl Report {
    pub fn new(ds: &Dataset, layout: Layout, views: &Views, names: Vec<String>) -> Report {
        let sessions: usize = ds.groups.iter().map(|g| g.sessions.len()).sum();
        let title = format!(
            "recall quality: {}, {} questions with an answer ({} without), {} groups, {} sessions; {} ({} views; {:.1} later sessions hidden a question)",
            ds.name,
            ds.questions.len(),
            ds.unanswerable,
            ds.groups.len(),
            sessions,
            layout.name(),
            views.views.len(),
            views.hidden as f64 / ds.questions.len().max(1) as f64,
        );
        Report {
            title,
            layout,
            all: Kind::new(names.len()),
            kinds: BTreeMap::new(),
            names,
            noisy: vec![[0; GATES.len()]; INJECTIONS.len()],
            chars: vec![[0; GATES.len()]; INJECTIONS.len()],
            unrelated_n: 0,
            top_scores: Vec::new(),
            unrelated_top: Vec::new(),
        }
    }

    /// A question of `kind`: each ranking's (session rank, answering turn
    /// in the top 5), and for each injection and gate whether its block
    /// held an answering turn.
    pub fn add(
        &mut self,
        kind: &str,
        results: &[(Option<usize>, bool)],
        held: &[[bool; GATES.len()]; INJECTIONS.len()],
    ) {
        let rankings = self.names.len();
        let kind = self
            .kinds
            .entry(kind.to_string())
            .or_insert_with(|| Kind::new(rankings));
        for k in [&mut self.all, kind] {
            for (t, (rank, turn)) in k.tallies.iter_mut().zip(results) {
                t.add(*rank, *turn);
            }
            for (h, held) in k.held.iter_mut().zip(held) {
                for (h, held) in h.iter_mut().zip(held) {
                    *h += usize::from(*held);
                }
            }
        }
    }

    /// A ranking's row: first, top 5, turn in the top 5.
    fn row(&self, name: &str, t: &Tally) -> [String; 3] {
        let none = || "n/a".to_string();
        match (name == ARCHIVES, self.layout) {
            (true, Layout::Conversation) => [none(), none(), none()],
            (true, Layout::Session) => [t.pct(t.first), t.pct(t.top5), "–".into()],
            _ => [t.pct(t.first), t.pct(t.top5), t.pct(t.turn5)],
        }
    }
}

pub fn print(r: &Report) {
    let n = r.all.n();
    println!("{}", r.title);
    println!(
        "  {:<30} {:>14} {:>14} {:>14}",
        "", "session first", "session top 5", "turn top 5"
    );
    for (name, t) in r.names.iter().zip(&r.all.tallies) {
        let [a, b, c] = r.row(name, t);
        println!("  {name:<30} {a:>14} {b:>14} {c:>14}");
    }
    println!(
        "  per-prompt injection ({n} questions; {} unrelated prompts): answer held / unrelated given a block / mean characters, by gate",
        r.unrelated_n
    );
    for (i, (hits, mc)) in INJECTIONS.iter().enumerate() {
        let cells: Vec<String> = GATES
            .iter()
            .enumerate()
            .map(|(k, (g, f))| {
                format!(
                    "{g:.2}/{f:.2}: {} {} {:4}",
                    pct(r.all.held[i][k], n),
                    pct(r.noisy[i][k], r.unrelated_n),
                    r.chars[i][k] / n.max(1)
                )
            })
            .collect();
        println!(
            "    {hits} hits, {mc} chars/message | {}",
            cells.join(" | ")
        );
    }
    let quantiles = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        [0.1, 0.25, 0.5, 0.75, 0.9]
            .iter()
            .map(|p| format!("{:.2}", v[((v.len() - 1) as f64 * p) as usize]))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!(
        "    top hit's score, p10 p25 p50 p75 p90: questions {} | unrelated {}",
        quantiles(&r.top_scores),
        quantiles(&r.unrelated_top)
    );
    // The product by kind, in one table.
    let (si, sk) = SHIPPED;
    println!(
        "  by kind: session first / session top 5 / turn top 5 / answer held (shipped injection: {} hits, {} chars, gate {:.2}/{:.2}; no gate)",
        INJECTIONS[si].0, INJECTIONS[si].1, GATES[sk].0, GATES[sk].1
    );
    for name in ["memory::recall", "memory::recall, embeddings off"] {
        let i = r.names.iter().position(|x| x == name).unwrap();
        println!("    {name}");
        let kinds =
            std::iter::once(("all", &r.all)).chain(r.kinds.iter().map(|(k, v)| (k.as_str(), v)));
        for (kind, k) in kinds {
            let t = &k.tallies[i];
            let [a, b, c] = r.row(name, t);
            println!(
                "      {kind:<28} n {:>4} {a:>7} {b:>7} {c:>7} {:>7} {:>7}",
                k.n(),
                pct(k.held[si][sk], k.n()),
                pct(k.held[si][0], k.n()),
            );
        }
    }
    // Every ranking and injection, kind by kind.
    for (kind, k) in &r.kinds {
        println!("  by kind {kind} ({} questions):", k.n());
        for (name, t) in r.names.iter().zip(&k.tallies) {
            let [a, b, c] = r.row(name, t);
            println!("    {name:<28} {a:>8} {b:>8} {c:>8}");
        }
        let cells: Vec<String> = INJECTIONS
            .iter()
            .zip(&k.held)
            .map(|((hits, mc), h)| {
                format!(
                    "{hits} hits {mc} chars {} ({} no gate)",
                    pct(h[sk], k.n()),
                    pct(h[0], k.n())
                )
            })
            .collect();
        println!(
            "    answer held at gate {:.2}/{:.2}: {}",
            GATES[sk].0,
            GATES[sk].1,
            cells.join(" | ")
        );
    }
}
