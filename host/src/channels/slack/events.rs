//! What a Socket Mode `events_api` envelope means ([`classify`]), and
//! Slack's markup in a message's text made readable ([`plain`]).
//!
//! A message with files (`files`, subtype `file_share` or none) is taken
//! with a placeholder for each (`[image: a.png] caption`); `socket`
//! replaces it with what the files became when media are kept
//! ([`caption`] is the text without the placeholders).
//!
//! Invariants: messages of bots (our own included) are never stored; a
//! channel no group is registered for has nothing stored; a message's
//! `ts` is its external id, so the same message handed in as `message`
//! and as `app_mention`, or delivered again, is stored once, and both
//! forms say the same about addressing (a mention of the bot in the text);
//! an edit of a message with files is not taken (its stored text holds
//! what its files became, a transcript; Slack also sends one when a
//! clip's own transcription is done).

use std::collections::HashMap;

use serde_json::Value;

use g2_core::validate::GroupFolder;

use super::{Identity, Jid};
use crate::messages::{CheckInbound, Inbound, Intake};

/// What an event means.
#[derive(Debug, PartialEq)]
pub enum Decision {
    Take(Intake),
    /// A message in a channel no group is registered for.
    Unregistered {
        jid: String,
        addressed: bool,
    },
    /// Nothing for us (why, for the debug log).
    Skip(&'static str),
}

/// Reads an `events_api` envelope's payload (an `event_callback`), with
/// the registered Slack groups by jid.
pub fn classify(payload: &Value, me: &Identity, groups: &HashMap<String, GroupFolder>) -> Decision {
    if payload["type"] != "event_callback" {
        return Decision::Skip("not an event callback");
    }
    let e = &payload["event"];
    let kind = e["type"].as_str().unwrap_or_default();
    if kind != "message" && kind != "app_mention" {
        return Decision::Skip("an event type g2 does not take");
    }
    let team = payload["team_id"].as_str().or(e["team"].as_str());
    let (Some(team), Some(channel)) = (team, e["channel"].as_str()) else {
        return Decision::Skip("no team or channel");
    };
    let Some(jid) = Jid::parse(&format!("{}{team}:{channel}", super::PREFIX)) else {
        return Decision::Skip("a team or channel id g2 does not know");
    };
    let direct = e["channel_type"] == "im";
    // An edit carries the new message inside it.
    let (m, edit) = match e["subtype"].as_str() {
        None | Some("file_share" | "thread_broadcast" | "me_message") => (e, false),
        Some("message_changed") => (&e["message"], true),
        Some("bot_message") => return Decision::Skip("a bot's message"),
        Some(_) => return Decision::Skip("a message subtype g2 does not take"),
    };
    let user = m["user"].as_str().unwrap_or_default();
    if m["bot_id"].is_string()
        || m["subtype"] == "bot_message"
        || user.is_empty()
        || user == me.user_id
    {
        return Decision::Skip("a bot's message");
    }
    let Some(ts) = m["ts"].as_str().filter(|t| !t.is_empty()) else {
        return Decision::Skip("a message without ts");
    };
    let raw = m["text"].as_str().unwrap_or_default();
    let addressed = kind == "app_mention"
        || direct
        || (!me.user_id.is_empty() && raw.contains(&format!("<@{}", me.user_id)));
    let Some(folder) = groups.get(&jid.to_string()) else {
        return Decision::Unregistered {
            jid: jid.to_string(),
            addressed,
        };
    };
    // Whole: a text over the limit is the sequencer's to refuse, and to
    // answer.
    let mut text = plain(raw, me);
    let files = super::files::files_of(m);
    if edit && !files.is_empty() {
        return Decision::Skip("an edit of a message with files");
    }
    if !files.is_empty() {
        let caption = text.trim();
        text = match caption {
            "" => super::files::placeholder(&files),
            c => format!("{} {c}", super::files::placeholder(&files)),
        };
    }
    if text.trim().is_empty() {
        return Decision::Skip("a message without text");
    }
    if edit {
        return Decision::Take(Intake::Edit {
            folder: folder.clone(),
            external_id: ts.to_string(),
            text,
            addressed,
        });
    }
    let inbound = Inbound {
        sender: user.to_string(),
        sender_name: None,
        text,
        external_id: Some(ts.to_string()),
        thread: m["thread_ts"].as_str().map(str::to_string),
        addressed,
        attachments: Vec::new(),
    };
    if inbound.check_fields().is_err() {
        return Decision::Skip("a message the log refuses");
    }
    Decision::Take(Intake::New {
        folder: folder.clone(),
        m: inbound,
    })
}

/// The text of an envelope's message as stored without its files: the
/// caption of what they become.
pub fn caption(payload: &Value, me: &Identity) -> String {
    plain(payload["event"]["text"].as_str().unwrap_or_default(), me)
}

/// Slack's markup as readable text: a mention of the bot becomes
/// `@<its name>`, other mentions `@name` (or `@<id>`), channels `#name`,
/// links `text (url)`, and `&amp;`, `&lt;`, `&gt;` their characters.
pub fn plain(text: &str, me: &Identity) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let Some(len) = rest[open..].find('>') else {
            out.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &rest[open + 1..open + len];
        let (target, label) = match inner.split_once('|') {
            Some((t, l)) => (t, Some(l)),
            None => (inner, None),
        };
        let shown = match (target.chars().next(), label) {
            (Some('@'), _) if !me.user_id.is_empty() && target[1..] == me.user_id => {
                format!(
                    "@{}",
                    if me.user.is_empty() {
                        &me.user_id
                    } else {
                        &me.user
                    }
                )
            }
            (Some('@'), Some(l)) => format!("@{}", l.trim_start_matches('@')),
            (Some('#'), Some(l)) => format!("#{l}"),
            (Some('@' | '#'), None) => target.to_string(),
            (Some('!'), Some(l)) => l.to_string(),
            (Some('!'), None) => format!("@{}", &target[1..]),
            (_, Some(l)) if l != target => format!("{l} ({target})"),
            _ => target.to_string(),
        };
        out.push_str(&shown);
        rest = &rest[open + len + 1..];
    }
    out.push_str(rest);
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Identity {
        Identity {
            team_id: "T1".into(),
            user_id: "UBOT".into(),
            user: "g2bot".into(),
            bot_id: "BBOT".into(),
        }
    }

    fn payload(event: Value) -> Value {
        json!({"team_id": "T1", "api_app_id": "A1", "type": "event_callback",
               "event_id": "Ev1", "event_time": 1, "event": event})
    }

    fn groups() -> HashMap<String, GroupFolder> {
        HashMap::from([
            ("sl:T1:C1".to_string(), GroupFolder::new("club").unwrap()),
            ("sl:T1:D1".to_string(), GroupFolder::new("ann").unwrap()),
        ])
    }

    fn taken(event: Value) -> (String, Inbound) {
        match classify(&payload(event), &me(), &groups()) {
            Decision::Take(Intake::New { folder, m }) => (folder.to_string(), m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mentions_address_the_assistant_and_other_messages_are_context() {
        let (folder, m) = taken(json!({"type": "app_mention", "user": "U1",
            "text": "<@UBOT> hi &amp; bye", "ts": "1.1", "channel": "C1", "event_ts": "1.1"}));
        assert_eq!(folder, "club");
        assert_eq!(
            (
                m.text.as_str(),
                m.addressed,
                m.sender.as_str(),
                m.external_id.as_deref(),
                m.thread.clone()
            ),
            ("@g2bot hi & bye", true, "U1", Some("1.1"), None)
        );
        // The same message as a `message` event says the same.
        let (_, same) = taken(
            json!({"type": "message", "user": "U1", "text": "<@UBOT> hi &amp; bye",
            "ts": "1.1", "channel": "C1", "channel_type": "channel"}),
        );
        assert_eq!(same, m);
        let (_, context) = taken(
            json!({"type": "message", "user": "U2", "text": "we need milk",
            "ts": "1.2", "channel": "C1", "channel_type": "channel", "thread_ts": "1.0"}),
        );
        assert!(!context.addressed);
        assert_eq!(context.thread.as_deref(), Some("1.0"));
        // A direct message always addresses it.
        let (folder, dm) = taken(json!({"type": "message", "user": "U2", "text": "hello",
            "ts": "1.3", "channel": "D1", "channel_type": "im"}));
        assert_eq!((folder.as_str(), dm.addressed), ("ann", true));
    }

    #[test]
    fn bots_strangers_edits_and_other_events() {
        let c = |event: Value| classify(&payload(event), &me(), &groups());
        for bot in [
            json!({"type": "message", "user": "UBOT", "text": "echo", "ts": "2.1", "channel": "C1"}),
            json!({"type": "message", "bot_id": "B2", "user": "U9", "text": "x", "ts": "2.2", "channel": "C1"}),
            json!({"type": "message", "subtype": "bot_message", "text": "x", "ts": "2.3", "channel": "C1"}),
        ] {
            assert_eq!(c(bot), Decision::Skip("a bot's message"));
        }
        assert_eq!(
            c(
                json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": "2.4", "channel": "C9"})
            ),
            Decision::Unregistered {
                jid: "sl:T1:C9".into(),
                addressed: true
            }
        );
        assert_eq!(
            c(
                json!({"type": "message", "subtype": "message_changed", "channel": "C1",
                "message": {"type": "message", "user": "U1", "text": "<@UBOT> fixed", "ts": "2.5"},
                "previous_message": {"user": "U1", "text": "fixd", "ts": "2.5"}, "ts": "2.6"})
            ),
            Decision::Take(Intake::Edit {
                folder: GroupFolder::new("club").unwrap(),
                external_id: "2.5".into(),
                text: "@g2bot fixed".into(),
                addressed: true,
            })
        );
        for skip in [
            json!({"type": "message", "subtype": "message_deleted", "channel": "C1", "ts": "2.7"}),
            json!({"type": "message", "subtype": "channel_join", "user": "U1", "text": "joined", "ts": "2.8", "channel": "C1"}),
            json!({"type": "reaction_added", "user": "U1"}),
            json!({"type": "message", "user": "U1", "text": "x", "ts": "2.9", "channel": "not-an-id"}),
        ] {
            assert!(matches!(c(skip), Decision::Skip(_)));
        }
        assert!(matches!(
            classify(&json!({"type": "url_verification"}), &me(), &groups()),
            Decision::Skip(_)
        ));
    }

    #[test]
    fn files_are_placeholders_before_they_are_kept_and_their_edits_are_left() {
        let file = |name: &str, mime: &str| {
            json!({"id": "F1", "name": name, "mimetype": mime,
            "size": 10, "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/x"})
        };
        let (_, m) = taken(
            json!({"type": "message", "subtype": "file_share", "user": "U1",
            "text": "<@UBOT> look", "ts": "3.1", "channel": "C1", "channel_type": "channel",
            "files": [file("a.png", "image/png"), file("b.pdf", "application/pdf")]}),
        );
        assert_eq!(m.text, "[image: a.png] [file: b.pdf] @g2bot look");
        assert!(m.addressed);
        // No subtype (newer payloads), no text: still taken.
        let mut clip = file("audio_message.webm", "audio/webm");
        clip["subtype"] = json!("slack_audio");
        let (_, m) = taken(
            json!({"type": "message", "user": "U1", "text": "", "ts": "3.2",
            "channel": "C1", "channel_type": "channel", "files": [clip]}),
        );
        assert_eq!(m.text, "[voice message]");
        let p = payload(
            json!({"type": "app_mention", "user": "U1", "text": "<@UBOT> look",
            "ts": "3.1", "channel": "C1", "files": [file("a.png", "image/png")]}),
        );
        assert_eq!(caption(&p, &me()), "@g2bot look");
        let edit = json!({"type": "message", "subtype": "message_changed", "channel": "C1",
            "message": {"type": "message", "user": "U1", "text": "", "ts": "3.2",
                "files": [file("audio_message.webm", "audio/webm")]}, "ts": "3.3"});
        assert_eq!(
            classify(&payload(edit), &me(), &groups()),
            Decision::Skip("an edit of a message with files")
        );
    }

    #[test]
    fn slack_markup_reads_as_text() {
        assert_eq!(
            plain(
                "<@UBOT> ask <@U2|ann> in <#C1|general> about <https://x.org|this> and <https://y.org> <!here> a &lt;b&gt; &amp;lt;",
                &me()
            ),
            "@g2bot ask @ann in #general about this (https://x.org) and https://y.org @here a <b> &lt;"
        );
        assert_eq!(
            plain("<@U3> <!subteam^S1|@devs> <unclosed", &me()),
            "@U3 @devs <unclosed"
        );
    }
}
