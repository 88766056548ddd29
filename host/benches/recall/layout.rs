//! How a data set is recorded, and which of its sessions each question
//! sees.
//!
//! - **Layout** (`G2_BENCH_LAYOUT`): `session` (the default) records each
//!   session as an archive of its own, made when the session began;
//!   `conversation` records all the sessions a question sees of its group
//!   as one archive, in date order, made a minute after the last message.
//!   Either way every message is dated (`Transcript::times`): its
//!   session's date and a minute for each message before it in the
//!   session.
//! - **What a question sees**: the sessions of its group dated on or before
//!   the day it is asked (LongMemEval_S's groups hold sessions of later
//!   questions, `data/second-public/README.md`); `G2_BENCH_LATER=show`
//!   shows every question every session. Each set of sessions some question
//!   sees is recorded once, as a g2 group of its own (a view): the group's
//!   own folder when it holds every session.
//!
//! A hit is judged by the session it comes from: an archive holds one
//! session, or in `conversation` several, each over a range of the
//! archive's messages (`Views::sessions_of`).

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use g2_core::transcript::Transcript;
use g2_core::validate::GroupFolder;
use g2_host::store::Store;

use super::data::Dataset;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Each session one archive.
    Session,
    /// Each group's sessions one archive.
    Conversation,
}

impl Layout {
    pub fn from_env() -> Layout {
        match std::env::var("G2_BENCH_LAYOUT").as_deref() {
            Err(_) | Ok("" | "session") => Layout::Session,
            Ok("conversation") => Layout::Conversation,
            Ok(other) => panic!("G2_BENCH_LAYOUT={other}: `session` or `conversation`"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Session => "each session its own archive",
            Layout::Conversation => "each group's sessions one archive",
        }
    }
}

/// A recorded session: its archive, and each exchange's message indices
/// in that archive.
pub type Recorded = (i64, Vec<Vec<i64>>);

/// A data set as recorded.
pub struct Views {
    /// Each question's view (in the data set's order): the folder of the
    /// sessions it sees.
    pub folder: Vec<GroupFolder>,
    /// Where unrelated prompts are asked, and when: each group's view of
    /// its last question, at that question's time.
    pub unrelated: Vec<(GroupFolder, DateTime<Utc>)>,
    /// (view, session id) → where that session was recorded.
    pub sessions: HashMap<(GroupFolder, String), Recorded>,
    /// Every view, with its group's name.
    pub views: Vec<(GroupFolder, String)>,
    /// Sessions hidden from questions (dated after the day asked), summed
    /// over the questions.
    pub hidden: usize,
    /// Archive id → the sessions it holds: (first message, last message,
    /// session id).
    turns: HashMap<i64, Vec<(i64, i64, String)>>,
}

impl Views {
    /// The sessions a passage of `archive` holding messages `first..=last`
    /// comes from, in order (one, unless it runs over the end of one).
    pub fn sessions_of(&self, archive: i64, (first, last): (i64, i64)) -> Vec<&str> {
        let held = &self.turns[&archive];
        let over: Vec<&str> = held
            .iter()
            .filter(|(a, b, _)| *a <= last && first <= *b)
            .map(|s| s.2.as_str())
            .collect();
        if !over.is_empty() {
            return over;
        }
        // Not within any session's messages: the last one begun by then.
        held.iter()
            .rev()
            .find(|(a, _, _)| *a <= first)
            .or(held.first())
            .map(|s| s.2.as_str())
            .into_iter()
            .collect()
    }
}

/// The first and last message of a session recorded with these exchanges'
/// message indices (none if it has no message).
fn span(messages: &[Vec<i64>]) -> Option<(i64, i64)> {
    let all = messages.iter().flatten();
    Some((*all.clone().min()?, *all.max()?))
}

/// Records `ds` in `store` as `layout` says, a view for each set of
/// sessions some question sees.
pub fn record(ds: &Dataset, store: &Store, layout: Layout) -> Views {
    let later = std::env::var("G2_BENCH_LATER").as_deref() == Ok("show");
    // (group, the sessions seen, by index) → the view's folder.
    let mut keyed: BTreeMap<(String, Vec<usize>), GroupFolder> = BTreeMap::new();
    let mut folder = Vec::new();
    let mut last: HashMap<&str, (DateTime<Utc>, GroupFolder)> = HashMap::new();
    let mut hidden = 0;
    for q in &ds.questions {
        let g = ds.groups.iter().find(|g| g.name == q.group).unwrap();
        let day = q.asked.format("%Y-%m-%d").to_string();
        let seen: Vec<usize> = (0..g.sessions.len())
            .filter(|&i| later || g.sessions[i].date[..10] <= *day)
            .collect();
        hidden += g.sessions.len() - seen.len();
        let name = if seen.len() == g.sessions.len() {
            super::slug(&g.name)
        } else {
            GroupFolder::new(format!("{}-seen-{}", super::slug(&g.name), seen.len())).unwrap()
        };
        let f = keyed.entry((g.name.clone(), seen)).or_insert(name).clone();
        if last
            .get(g.name.as_str())
            .is_none_or(|(at, _)| *at < q.asked)
        {
            last.insert(&g.name, (q.asked, f.clone()));
        }
        folder.push(f);
    }
    // A group no question is asked in is seen whole, the day after it.
    for g in &ds.groups {
        if !last.contains_key(g.name.as_str()) {
            let f = super::slug(&g.name);
            keyed.insert((g.name.clone(), (0..g.sessions.len()).collect()), f.clone());
            last.insert(&g.name, (super::data::asked_after(&g.sessions), f));
        }
    }
    let mut views = Views {
        folder,
        unrelated: ds
            .groups
            .iter()
            .map(|g| {
                let (at, f) = &last[g.name.as_str()];
                (f.clone(), *at)
            })
            .collect(),
        sessions: HashMap::new(),
        views: Vec::new(),
        hidden,
        turns: HashMap::new(),
    };
    // Recorded in the data set's order of groups, a group's views from the
    // smallest.
    let place = |name: &str| ds.groups.iter().position(|g| g.name == name).unwrap();
    let mut keyed: Vec<_> = keyed.into_iter().collect();
    keyed.sort_by_key(|((group, seen), _)| (place(group), seen.len()));
    for ((group, seen), f) in keyed {
        let g = &ds.groups[place(&group)];
        match layout {
            Layout::Session => {
                let mut batch = Vec::new();
                let mut msgs = Vec::new();
                for &n in &seen {
                    let s = &g.sessions[n];
                    let (title, body, m) = super::render(&s.exchanges, &s.date);
                    batch.push(super::prepared(&f, n, &s.date, title, body));
                    msgs.push(m);
                }
                let ids = super::record(store, batch);
                for ((&n, id), m) in seen.iter().zip(ids).zip(msgs) {
                    let s = &g.sessions[n];
                    let (a, b) = span(&m).unwrap_or((0, -1));
                    views.turns.insert(id, vec![(a, b, s.id.clone())]);
                    views.sessions.insert((f.clone(), s.id.clone()), (id, m));
                }
            }
            Layout::Conversation => {
                let mut order = seen.clone();
                order.sort_by(|a, b| g.sessions[*a].date.cmp(&g.sessions[*b].date));
                let mut t = Transcript::default();
                let mut held = Vec::new();
                let mut msgs = Vec::new();
                for &n in &order {
                    let s = &g.sessions[n];
                    let m = super::append(&mut t, &s.exchanges, super::utc(&s.date));
                    if let Some((a, b)) = span(&m) {
                        held.push((a, b, s.id.clone()));
                    }
                    msgs.push(m);
                }
                // Made a minute after its last message.
                let end = t
                    .times
                    .iter()
                    .flatten()
                    .map(|s| s.last)
                    .max()
                    .unwrap_or_else(|| super::utc(&g.sessions[order[0]].date));
                let made = (end + chrono::Duration::minutes(1))
                    .format("%Y-%m-%d %H:%M")
                    .to_string();
                let (title, body) = super::markdown(&t, super::utc(&made));
                let id = super::record(
                    store,
                    vec![super::prepared(&f, seen.len(), &made, title, body)],
                )[0];
                views.turns.insert(id, held);
                for (&n, m) in order.iter().zip(msgs) {
                    let s = &g.sessions[n];
                    views.sessions.insert((f.clone(), s.id.clone()), (id, m));
                }
            }
        }
        views.views.push((f, group));
    }
    views
}
