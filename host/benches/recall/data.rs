//! The recall bench's data sets, read into one shape: groups of dated
//! sessions of exchanges, and questions labelled with the exchanges that
//! answer them.
//!
//! - MemoryBank (MIT; `tests/fixtures/memory/memorybank` or
//!   `$G2_MEMORY_FIXTURES`) with our labels in `data/memorybank_labels.jsonl`.
//! - `data/second-public/` (LongMemEval_S, MIT, a derived subset) and
//!   `data/generated/` (written and labelled for this project), in the
//!   shape their READMEs give.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde_json::Value;

pub struct Session {
    pub id: String,
    /// `YYYY-MM-DD HH:MM`.
    pub date: String,
    /// (user, assistant).
    pub exchanges: Vec<(String, String)>,
}

pub struct Group {
    pub name: String,
    pub sessions: Vec<Session>,
}

pub struct Question {
    pub group: String,
    pub text: String,
    /// (session id, exchange index), first the one that states it.
    pub evidence: Vec<(String, usize)>,
    pub kind: String,
    /// When it is asked: the end of the day the data set gives it (a
    /// date without a time), else noon the day after its group's last
    /// session.
    pub asked: DateTime<Utc>,
}

pub struct Dataset {
    pub name: &'static str,
    pub groups: Vec<Group>,
    pub questions: Vec<Question>,
    /// Questions left out: no exchange answers them.
    pub unanswerable: usize,
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// When a question dated `day` (`YYYY-MM-DD`) is asked: the day's last
/// minute, so that the sessions of that day come before it.
fn asked_on(day: &str) -> DateTime<Utc> {
    super::utc(&format!("{day} 23:59"))
}

/// When a question of a group whose data set dates no question is asked:
/// noon the day after the group's last session.
pub fn asked_after(sessions: &[Session]) -> DateTime<Utc> {
    let last = sessions.iter().map(|s| &s.date[..10]).max().unwrap();
    let day = NaiveDate::parse_from_str(last, "%Y-%m-%d").unwrap() + Days::new(1);
    super::utc(&format!("{day} 12:00"))
}

/// Checks every label against its data set: the exchange exists.
fn check(ds: &Dataset) {
    let by: HashMap<(&str, &str), usize> = ds
        .groups
        .iter()
        .flat_map(|g| {
            g.sessions
                .iter()
                .map(move |s| ((g.name.as_str(), s.id.as_str()), s.exchanges.len()))
        })
        .collect();
    for q in &ds.questions {
        for (s, e) in &q.evidence {
            let n = by.get(&(q.group.as_str(), s.as_str()));
            assert!(n.is_some_and(|n| e < n), "{}: {} {s} #{e}", ds.name, q.text);
        }
    }
}

/// MemoryBank: each day one session, at noon; each question of a kind
/// (`type` in the labels: `dated`, `relative` or `plain`).
pub fn memorybank(fixtures: &Path, labels: &Path) -> Dataset {
    let bank = read_json(&fixtures.join("memory_bank_en.json"));
    let mut groups = Vec::new();
    for (name, person) in bank.as_object().unwrap() {
        let sessions = person["history"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(day, list)| Session {
                id: day.clone(),
                date: format!("{day} 12:00"),
                exchanges: list
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        (
                            e["query"].as_str().unwrap_or("").to_string(),
                            e["response"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect(),
            })
            .collect();
        groups.push(Group {
            name: name.trim().to_string(),
            sessions,
        });
    }
    let source: HashMap<String, Vec<String>> = lines(&fixtures.join("probing_questions_en.jsonl"))
        .into_iter()
        .flat_map(|v| serde_json::from_value::<HashMap<String, Vec<String>>>(v).unwrap())
        .map(|(k, v)| (k.trim().to_string(), v))
        .collect();
    let mut questions = Vec::new();
    let mut unanswerable = 0;
    for l in lines(labels) {
        let person = l["person"].as_str().unwrap().trim().to_string();
        let text = l["question"].as_str().unwrap().to_string();
        assert_eq!(
            source[&person][l["q"].as_u64().unwrap() as usize],
            text,
            "{person}"
        );
        let evidence: Vec<(String, usize)> = l["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["day"].as_str().unwrap().to_string(),
                    e["turn"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        if evidence.is_empty() {
            unanswerable += 1;
            continue;
        }
        let group = groups.iter().find(|g| g.name == person).unwrap();
        questions.push(Question {
            asked: asked_after(&group.sessions),
            group: person,
            text,
            evidence,
            kind: l["type"].as_str().unwrap().to_string(),
        });
    }
    let ds = Dataset {
        name: "MemoryBank",
        groups,
        questions,
        unanswerable,
    };
    check(&ds);
    ds
}

/// A set in the shared shape (`conversations.json`, `labels.jsonl`).
pub fn shaped(name: &'static str, dir: &Path) -> Dataset {
    let conv = read_json(&dir.join("conversations.json"));
    let groups: Vec<Group> = conv
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, g)| Group {
            name: name.clone(),
            sessions: g["sessions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| Session {
                    id: s["id"].as_str().unwrap().to_string(),
                    date: s["date"].as_str().unwrap().to_string(),
                    exchanges: s["exchanges"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| {
                            (
                                e["user"].as_str().unwrap_or("").to_string(),
                                e["assistant"].as_str().unwrap_or("").to_string(),
                            )
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    let mut questions = Vec::new();
    let mut unanswerable = 0;
    for l in lines(&dir.join("labels.jsonl")) {
        let evidence: Vec<(String, usize)> = l["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["session"].as_str().unwrap().to_string(),
                    e["exchange"].as_u64().unwrap() as usize,
                )
            })
            .collect();
        if evidence.is_empty() {
            unanswerable += 1;
            continue;
        }
        let group = l["person"].as_str().unwrap().to_string();
        let asked = match l["asked"].as_str() {
            Some(day) => asked_on(day),
            None => asked_after(
                &groups
                    .iter()
                    .find(|g: &&Group| g.name == group)
                    .unwrap()
                    .sessions,
            ),
        };
        questions.push(Question {
            group,
            text: l["question"].as_str().unwrap().to_string(),
            evidence,
            kind: l["type"].as_str().unwrap_or("").to_string(),
            asked,
        });
    }
    let ds = Dataset {
        name,
        groups,
        questions,
        unanswerable,
    };
    check(&ds);
    ds
}

/// REALTALK (Lee et al., 2025: 21 days of real messaging between two
/// people, with memory-probing questions whose evidence is labelled by
/// message, `D<session>:<message>`), read from `$G2_REALTALK_DIR`, the
/// `data/Chat_*.json` files of github.com/danny911kr/REALTALK. Published
/// without a licence, so it is not copied into the project
/// (docs/recall.md). Each session is one archive; an exchange is one
/// speaker's run of messages and the other's answer, each message as
/// `Name: text`.
pub fn realtalk(dir: &Path) -> Dataset {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("Chat_") && n.ends_with(".json")
        })
        .collect();
    files.sort();
    let mut groups = Vec::new();
    let mut questions = Vec::new();
    let mut unanswerable = 0;
    for f in files {
        let d = read_json(&f);
        let name = f.file_stem().unwrap().to_string_lossy().replace('_', " ");
        let mut sessions = Vec::new();
        // "D3:12" → (session id, exchange index).
        let mut at: HashMap<String, (String, usize)> = HashMap::new();
        for n in 1.. {
            let Some(msgs) = d.get(format!("session_{n}")).and_then(Value::as_array) else {
                break;
            };
            // "29.12.2023, 22:42:04" → "2023-12-29 22:42".
            let when = d[format!("session_{n}_date_time")].as_str().unwrap();
            let date = format!(
                "{}-{}-{} {}",
                &when[6..10],
                &when[3..5],
                &when[..2],
                &when[12..17]
            );
            let mut exchanges: Vec<(String, String)> = Vec::new();
            let mut opener: Option<String> = None;
            for m in msgs {
                let who = m["speaker"].as_str().unwrap().to_string();
                let text = m["clean_text"].as_str().unwrap_or("").trim();
                let line = format!("{who}: {text}");
                let same = opener.as_deref() == Some(who.as_str());
                match exchanges.last_mut() {
                    Some((u, a)) if same && a.is_empty() => {
                        u.push('\n');
                        u.push_str(&line);
                    }
                    Some((_, a)) if !same => {
                        if !a.is_empty() {
                            a.push('\n');
                        }
                        a.push_str(&line);
                    }
                    // The first message, or the opener's after an answer.
                    _ => {
                        exchanges.push((line, String::new()));
                        opener = Some(who.clone());
                    }
                }
                at.insert(
                    m["dia_id"].as_str().unwrap().to_string(),
                    (n.to_string(), exchanges.len() - 1),
                );
            }
            sessions.push(Session {
                id: n.to_string(),
                date,
                exchanges,
            });
        }
        for q in d["qa"].as_array().unwrap() {
            let mut evidence: Vec<(String, usize)> = Vec::new();
            for e in q["evidence"].as_array().into_iter().flatten() {
                if let Some(x) = e.as_str().and_then(|e| at.get(e.trim()))
                    && !evidence.contains(x)
                {
                    evidence.push(x.clone());
                }
            }
            if evidence.is_empty() {
                unanswerable += 1;
                continue;
            }
            questions.push(Question {
                group: name.clone(),
                text: q["question"].as_str().unwrap().to_string(),
                evidence,
                kind: format!("category {}", q["category"]),
                asked: asked_after(&sessions),
            });
        }
        groups.push(Group { name, sessions });
    }
    let ds = Dataset {
        name: "REALTALK",
        groups,
        questions,
        unanswerable,
    };
    check(&ds);
    ds
}

/// Every data set there is: MemoryBank and the two in `benches/data/`,
/// and REALTALK when `$G2_REALTALK_DIR` names it.
pub fn all(root: &Path) -> Vec<Dataset> {
    let fixtures = std::env::var_os("G2_MEMORY_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("tests/fixtures/memory/memorybank"));
    let data = root.join("host/benches/data");
    let mut out = vec![memorybank(&fixtures, &data.join("memorybank_labels.jsonl"))];
    out.push(shaped("LongMemEval_S subset", &data.join("second-public")));
    if data.join("generated/labels.jsonl").is_file() {
        out.push(shaped("generated", &data.join("generated")));
    }
    if let Some(dir) = std::env::var_os("G2_REALTALK_DIR") {
        out.push(realtalk(Path::new(&dir)));
    }
    out
}
