//! Taking a captured hook event into the store. The hook stripped and
//! redacted it already; the host does it again (the events folder is the
//! agent's to write) with its own credential among the secrets, then maps
//! the event onto sessions, batches and activities:
//!
//! - `session_start` opens (or reopens) the session, with its source;
//! - `prompt` starts the next batch — a routed prompt is stored as who said
//!   what (`Ann: we need milk`, one line per message) with its senders and
//!   when its first message was said (a direct prompt's is not known: read
//!   as when it was captured); an entirely private prompt is a batch with
//!   no text;
//! - `tool` records an activity in the open batch (none open: recovery
//!   attaches it later); a tool call without an id gets one made of what
//!   is unique to it, so a replay still finds it;
//! - `stop` completes the open batch with the reply;
//! - `session_end` completes the session.
//!
//! **Invariant:** one event file is one transaction, and a file taken in
//! before is recognised by name (`store::memory::first_sight`) and changes
//! nothing: an event file replayed after a crash neither loses nor
//! duplicates a row.

use crate::store::db::Db;

use chrono::{DateTime, SecondsFormat, Utc};
use g2_core::envelope;
use g2_core::privacy::Redactor;
use g2_core::validate::GroupFolder;
use g2_core::wire::Captured;

use crate::Result;
use crate::store::memory as rows;

/// Takes in the capture event of file `name`; false when it was a replay.
pub fn capture(
    tx: &Db<'_>,
    group: &GroupFolder,
    name: &str,
    session_id: Option<&str>,
    at: &str,
    event: &Captured,
    redactor: &Redactor,
) -> Result<bool> {
    if !rows::first_sight(tx, group, name, at)? {
        return Ok(false);
    }
    // Without Claude Code's session id there is nothing to attach it to.
    let Some(sid) = session_id.filter(|s| !s.is_empty()) else {
        return Ok(true);
    };
    let clean = |s: &str| redactor.clean(s).into_owned();
    let (source, transcript) = match event {
        Captured::SessionStart {
            source,
            transcript_path,
        } => (
            source.as_deref().map(clean),
            transcript_path.as_deref().map(clean),
        ),
        _ => (None, None),
    };
    let session = rows::open_session(tx, group, sid, source.as_deref(), transcript.as_deref(), at)?;
    match event {
        Captured::SessionStart { .. } | Captured::SubagentStop { .. } => {}
        Captured::Prompt { text, private } => {
            // Unwrapped first: in an envelope a private tag is escaped.
            let (prompt, senders, said_at) = if *private {
                (String::new(), Vec::new(), None)
            } else {
                let (said, senders, said_at) = who_said(text, Utc::now());
                let senders = senders.iter().map(|s| clean(s)).collect();
                (clean(&said).trim().to_string(), senders, said_at)
            };
            rows::start_said_batch(tx, session, &prompt, &senders, said_at.as_deref(), at)?;
        }
        Captured::Tool {
            tool_use_id,
            tool,
            input,
            output,
            files_read,
            files_modified,
            ok,
            subagent,
        } => {
            let id = match tool_use_id.as_deref().filter(|s| !s.is_empty()) {
                Some(id) => id.to_string(),
                None => format!("{sid}:{at}:{name}"),
            };
            let batch = rows::open_batch(tx, session)?;
            // Paths and names are the agent's text too.
            let paths = |v: &[String]| v.iter().map(|p| clean(p)).collect::<Vec<_>>();
            rows::add_activity(
                tx,
                session,
                batch,
                &rows::NewActivity {
                    tool: &clean(tool),
                    tool_use_id: &clean(&id),
                    input: &clean(&input.to_string()),
                    output: &clean(output),
                    files_read: &paths(files_read),
                    files_modified: &paths(files_modified),
                    ok: *ok,
                    subagent: *subagent,
                    at,
                },
            )?;
        }
        Captured::Stop { reply } => {
            if let Some(batch) = rows::open_batch(tx, session)? {
                let reply = reply.as_deref().map(clean);
                rows::finish_batch(tx, batch, reply.as_deref(), at)?;
            }
        }
        Captured::SessionEnd { reason } => {
            rows::end_session(tx, session, reason.as_deref().map(clean).as_deref(), at)?;
        }
    }
    Ok(true)
}

/// Later than now by more than this, a message's time is not believed.
const CLOCK_SKEW: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

/// A routed prompt as who said what, one line per message, its senders
/// (each once, in order) and when its first message was said (RFC 3339,
/// UTC; the earliest of its messages' times that read as RFC 3339 and are
/// not after `now` by more than [`CLOCK_SKEW`]); any other prompt as it
/// is, said at a time not known.
fn who_said(prompt: &str, now: DateTime<Utc>) -> (String, Vec<String>, Option<String>) {
    match envelope::read(prompt) {
        Some(env) if !env.messages.is_empty() => {
            let said_at = env
                .messages
                .iter()
                .filter_map(|m| DateTime::parse_from_rfc3339(&m.time).ok())
                .map(|t| t.with_timezone(&Utc))
                .filter(|t| *t <= now + CLOCK_SKEW)
                .min()
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
            let mut senders: Vec<String> = Vec::new();
            let lines: Vec<String> = env
                .messages
                .iter()
                .map(|m| {
                    if !senders.contains(&m.sender) {
                        senders.push(m.sender.clone());
                    }
                    format!("{}: {}", m.sender, m.text)
                })
                .collect();
            (lines.join("\n"), senders, said_at)
        }
        _ => (prompt.to_string(), Vec::new(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routed_prompt_is_who_said_what() {
        let p = envelope::write([
            ("Ann", "t", "we need milk"),
            ("Bob", "t", "and eggs"),
            ("Ann", "t", "ok"),
        ]);
        let (text, senders, said_at) = who_said(&p, Utc::now());
        assert_eq!(text, "Ann: we need milk\nBob: and eggs\nAnn: ok");
        assert_eq!(senders, ["Ann", "Bob"]);
        assert_eq!(said_at, None, "no time reads as one");
        assert_eq!(
            who_said("plain", Utc::now()),
            ("plain".to_string(), vec![], None)
        );
    }

    #[test]
    fn a_routed_prompt_was_said_at_its_first_believable_time() {
        let now = DateTime::parse_from_rfc3339("2026-05-10T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let p = envelope::write([
            ("Ann", "2026-05-10T12:04:00.000Z", "within the clocks' skew"),
            (
                "Bob",
                "2026-05-07T09:30:00+02:00",
                "three days ago, in Paris",
            ),
            ("Cy", "yesterday", "not a time"),
            ("Dee", "2026-05-11T12:00:00.000Z", "tomorrow: not believed"),
            ("Eve", "2026-05-08T10:00:00.000Z", "later than Bob"),
        ]);
        let (_, _, said_at) = who_said(&p, now);
        assert_eq!(said_at.as_deref(), Some("2026-05-07T07:30:00.000Z"));
        let future = envelope::write([("Dee", "2026-05-10T12:06:00.000Z", "too soon")]);
        assert_eq!(who_said(&future, now).2, None);
    }

    #[test]
    fn events_become_rows_once_and_clean() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            crate::store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(1))
                .unwrap();
        let fam = GroupFolder::new("fam").unwrap();
        let r = Redactor::default();
        let events = [
            (
                "e1",
                Captured::SessionStart {
                    source: Some("startup".into()),
                    transcript_path: None,
                },
            ),
            (
                "e2",
                Captured::Prompt {
                    text: envelope::write([("Ann", "t", "hi <private>4417</private>")]),
                    private: false,
                },
            ),
            (
                "e3",
                Captured::Tool {
                    tool_use_id: Some("toolu_1".into()),
                    tool: "Bash".into(),
                    input: serde_json::json!({ "command": "echo sk-ant-api03-abcdefghijklmnopqrstuvwx" }),
                    output: "sk-ant-api03-abcdefghijklmnopqrstuvwx".into(),
                    files_read: vec![],
                    files_modified: vec![],
                    ok: true,
                    subagent: false,
                },
            ),
            (
                "e4",
                Captured::Stop {
                    reply: Some("done".into()),
                },
            ),
            (
                "e5",
                Captured::Prompt {
                    text: String::new(),
                    private: true,
                },
            ),
            (
                "e6",
                Captured::SessionEnd {
                    reason: Some("exit".into()),
                },
            ),
        ];
        for (i, (name, ev)) in events.iter().enumerate() {
            let at = format!("2026-01-01T00:00:0{i}.000Z");
            let took = store
                .write_blocking(|tx| capture(tx, &fam, name, Some("s1"), &at, ev, &r))
                .unwrap();
            assert!(took);
            // The same file again (a replay after a crash): nothing changes.
            let again = store
                .write_blocking(|tx| capture(tx, &fam, name, Some("s1"), &at, ev, &r))
                .unwrap();
            assert!(!again, "{name}");
        }
        let t = store
            .read_blocking(|c| rows::timeline(c, &fam, "s1"))
            .unwrap()
            .unwrap();
        assert_eq!(t.session.status, "completed");
        assert_eq!(t.session.start_source.as_deref(), Some("startup"));
        assert_eq!(t.batches.len(), 2);
        assert_eq!(t.batches[0].prompt, "Ann: hi");
        assert_eq!(t.batches[0].senders, ["Ann"]);
        assert_eq!(t.batches[0].reply.as_deref(), Some("done"));
        let a = &t.batches[0].activities;
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].output, "[redacted:anthropic-key]");
        assert!(!a[0].input.to_string().contains("sk-ant"), "{}", a[0].input);
        assert_eq!(
            t.batches[1].prompt, "",
            "an entirely private prompt keeps no text"
        );
        let dump: String = store
            .read_blocking(|c| {
                c.query_row(
                    "SELECT group_concat(prompt, ' ') FROM prompt_batches",
                    (),
                    |r| r.get(0),
                )
            })
            .unwrap();
        assert!(!dump.contains("4417"), "{dump}");
    }
}
