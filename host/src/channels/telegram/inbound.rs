//! Telegram's updates in: the long-polling loop, and what each update
//! means ([`classify`]).
//!
//! Invariants: the offset of `getUpdates` lives in `router_state` under
//! [`OFFSET_KEY`] and moves only in the transaction that stores the
//! updates before it; messages of other bots and of the bot itself are
//! never stored; a chat no group is registered for has nothing stored.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use teloxide_core::payloads::GetUpdatesSetters;
use teloxide_core::requests::{Request, Requester};
use teloxide_core::types::{
    AllowedUpdate, MessageEntityKind, MessageEntityRef, Update, UpdateKind,
};
use teloxide_core::{ApiError, RequestError};

use g2_core::validate::GroupFolder;

use super::{Identity, Jid, Telegram};
use crate::background::StopSignal;
use crate::channels::{Channels, clean_name};
use crate::config::{TelegramSettings, Unregistered};
use crate::messages::{CheckInbound, Inbound, Intake, Mark};
use crate::store;

/// The `router_state` key of the next update to fetch.
pub const OFFSET_KEY: &str = "telegram:offset";
/// Telegram's anonymous group admin: a person posting as the group.
const GROUP_ANONYMOUS_BOT: u64 = 1_087_968_824;
/// The longest wait between attempts when the Bot API keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What an update means.
#[derive(Debug, PartialEq)]
pub(super) enum Decision {
    Take(Intake),
    /// A message in a chat no group is registered for.
    Unregistered {
        chat: i64,
        addressed: bool,
    },
    /// Nothing for us (why, for the debug log).
    Skip(&'static str),
}

/// The polling loop: `getMe` (until it answers), then `getUpdates` for as
/// long as the host runs.
pub(super) async fn poll(
    tg: Arc<Telegram>,
    channels: Channels,
    settings: TelegramSettings,
    mut stop: StopSignal,
) {
    let mut backoff = Duration::from_secs(1);
    let me = loop {
        match super::identify(&tg.bot).await {
            Ok(me) => break me,
            Err(e) => {
                tracing::error!(error = %e, retry_in = ?backoff, "telegram: getMe failed; no updates until it answers");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = &mut stop => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    };
    tracing::info!(bot = %me.username, "telegram: polling for updates");
    let store = tg.store.clone();
    backoff = Duration::from_secs(1);
    // Known after each batch is stored; read from the store at start and
    // after a batch failed to store.
    let mut next: Option<i32> = None;
    loop {
        let offset = match next {
            Some(o) => o,
            None => match store
                .read(|c| store::router_state::get(c, OFFSET_KEY))
                .await
            {
                Ok(v) => v.and_then(|v| v.parse::<i32>().ok()).unwrap_or(0),
                Err(e) => {
                    tracing::error!(error = %e, "telegram: reading the update offset");
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        _ = &mut stop => return,
                    }
                    continue;
                }
            },
        };
        let request = tg
            .poller
            .get_updates()
            .offset(offset)
            .timeout(settings.poll_timeout_secs as u32)
            .allowed_updates([AllowedUpdate::Message, AllowedUpdate::EditedMessage]);
        let fetched = tokio::select! {
            r = request.send() => r,
            _ = &mut stop => return,
        };
        let updates = match fetched {
            Ok(u) => {
                backoff = Duration::from_secs(1);
                u
            }
            Err(e) => {
                let wait = match &e {
                    RequestError::RetryAfter(s) => s.duration(),
                    RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => {
                        tracing::error!(
                            "telegram: another process is polling this bot's updates; only one may"
                        );
                        backoff
                    }
                    _ => {
                        let why = super::describe(&e, tg.bot.token());
                        tracing::warn!(error = %why, retry_in = ?backoff, "telegram: getUpdates failed");
                        backoff
                    }
                };
                backoff = (backoff * 2).min(MAX_BACKOFF);
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = &mut stop => return,
                }
                continue;
            }
        };
        let Some(last) = updates.iter().map(|u| u.id.0).max() else {
            continue;
        };
        // Tests hold the host here to kill it between fetching and storing.
        fail::fail_point!("telegram-fetched");
        match take(&tg, &channels, &settings, &me, &updates, last).await {
            // Stored, or refused item by item: the offset moved on with them.
            Ok(()) => next = Some(last as i32 + 1),
            Err(e) => {
                // Not stored and the offset did not move: fetched again.
                tracing::error!(error = %e, "telegram: storing updates");
                next = None;
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    _ = &mut stop => return,
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Stores one batch of updates with the next offset, then sends the
/// notices it calls for.
async fn take(
    tg: &Telegram,
    channels: &Channels,
    settings: &TelegramSettings,
    me: &Identity,
    updates: &[Update],
    last: u32,
) -> crate::Result<()> {
    let registered: Vec<crate::groups::Group> = tg
        .store
        .read(store::groups::list)
        .await?
        .into_iter()
        .filter(|g| g.jid.starts_with(super::PREFIX))
        .collect();
    let groups: HashMap<String, GroupFolder> = registered
        .iter()
        .map(|g| (g.jid.clone(), g.folder.clone()))
        .collect();
    let mut items = Vec::new();
    let mut strangers: Vec<i64> = Vec::new();
    let mut file_notes: Vec<(i64, Vec<String>)> = Vec::new();
    for u in updates {
        match classify(u, me, &groups) {
            // A message's file is fetched and kept (voice transcribed)
            // before the batch is stored: the batch keeps its order.
            Decision::Take(Intake::New { folder, mut m }) => {
                if let (Some(media), UpdateKind::Message(msg)) = (channels.media(), &u.kind)
                    && let Some(f) = super::files::file_of(msg)
                    && let Some(g) = registered.iter().find(|g| g.folder == folder)
                {
                    let incoming = super::files::fetch(&tg.bot, &f, media.max_bytes()).await;
                    let caption = msg.caption().unwrap_or("");
                    let kept = media
                        .keep(g, &msg.id.0.to_string(), caption, vec![incoming])
                        .await;
                    m.text = kept.text;
                    m.attachments = kept.attachments;
                    if !kept.notes.is_empty() {
                        file_notes.push((msg.chat.id.0, kept.notes));
                    }
                }
                items.push(Intake::New { folder, m });
            }
            // An edit must not replace the text kept with a message's file
            // (its transcript), as on Slack and Discord.
            Decision::Take(Intake::Edit { .. })
                if channels.media().is_some()
                    && matches!(&u.kind, UpdateKind::EditedMessage(msg) if super::files::file_of(msg).is_some()) =>
            {
                tracing::debug!(
                    update = u.id.0,
                    "telegram: an edit of a message with a file skipped"
                );
            }
            Decision::Take(i) => items.push(i),
            Decision::Unregistered { chat, addressed } => {
                tracing::info!(chat = %Jid { chat, topic: None }, "telegram: a message from a chat that is not registered; dropped");
                if addressed && !strangers.contains(&chat) {
                    strangers.push(chat);
                }
            }
            Decision::Skip(why) => {
                tracing::debug!(update = u.id.0, why, "telegram: update skipped");
            }
        }
    }
    // A notice goes out at most once per chat: marked before it is sent.
    let mut notices = Vec::new();
    if settings.unregistered == Unregistered::Notice {
        for chat in strangers {
            let key = format!("telegram:noticed:{chat}");
            let first = tg
                .store
                .write(move |tx| {
                    let first = store::router_state::get(tx, &key)?.is_none();
                    if first {
                        store::router_state::set(tx, &key, &crate::now_rfc3339())?;
                    }
                    Ok(first)
                })
                .await?;
            if first {
                notices.push(chat);
            }
        }
    }
    let mark = Mark {
        key: OFFSET_KEY.into(),
        value: (i64::from(last) + 1).to_string(),
    };
    let answers = channels.take_in(items, Some(mark)).await?;
    for a in answers {
        if let Err(e) = a {
            tracing::warn!(error = %e, "telegram: a message could not be stored; dropped");
        }
    }
    for (chat, notes) in file_notes {
        let text = format!("Not everything you sent reached me: {}", notes.join("; "));
        if let Err(e) = tg.notify(chat, &text).await {
            tracing::warn!(chat, error = %e, "telegram: the note about a file was not sent");
        }
    }
    for chat in notices {
        let text = format!(
            "This chat is not registered with g2, so nobody here is answered. \
             Its chat id is {chat}: the owner can register it with\n\
             g2 groups add <folder> --jid tg:{chat} --name <name>"
        );
        if let Err(e) = tg.notify(chat, &text).await {
            tracing::warn!(chat, error = %e, "telegram: the notice to an unregistered chat was not sent");
        }
    }
    Ok(())
}

/// What one update means: a message (or an edit) for a registered group,
/// a message from a chat that is not registered, or nothing for us.
pub(super) fn classify(
    update: &Update,
    me: &Identity,
    groups: &HashMap<String, GroupFolder>,
) -> Decision {
    let (msg, edited) = match &update.kind {
        UpdateKind::Message(m) => (m, false),
        UpdateKind::EditedMessage(m) => (m, true),
        _ => return Decision::Skip("not a message"),
    };
    let Some(from) = &msg.from else {
        return Decision::Skip("no sender");
    };
    let anonymous_admin = from.id.0 == GROUP_ANONYMOUS_BOT && msg.sender_chat.is_some();
    if from.id.0 == me.id {
        return Decision::Skip("the bot's own message");
    }
    if from.is_bot && !anonymous_admin {
        return Decision::Skip("another bot's message");
    }
    let chat = msg.chat.id.0;
    let topic = msg
        .thread_id
        .filter(|_| msg.is_topic_message)
        .map(|t| t.0.0);
    let chat_jid = Jid { chat, topic: None };
    let topic_jid = topic.map(|t| Jid {
        chat,
        topic: Some(t),
    });
    let folder = topic_jid
        .and_then(|j| groups.get(&j.to_string()))
        .or_else(|| groups.get(&chat_jid.to_string()));
    let addressed = msg.chat.is_private() || addresses(msg, me);
    let Some(folder) = folder.cloned() else {
        return Decision::Unregistered { chat, addressed };
    };
    if let Some(to) = msg.migrate_to_chat_id() {
        // The chat's id changes; its group must be registered again.
        tracing::warn!(
            group = %folder,
            from = %chat_jid,
            to = %Jid { chat: to.0, topic: None },
            "telegram: the chat became a supergroup with a new id; register the group again with the new jid"
        );
        return Decision::Skip("the chat moved to a new id");
    }
    let Some(text) = text_of(msg) else {
        return Decision::Skip("no text and no media (a service message)");
    };
    if edited {
        return Decision::Take(Intake::Edit {
            folder,
            external_id: msg.id.0.to_string(),
            text,
            addressed,
        });
    }
    let (sender, sender_name) = match (&msg.sender_chat, anonymous_admin) {
        (Some(c), true) => (format!("chat:{}", c.id.0), c.title().map(str::to_string)),
        _ => {
            let full = match &from.last_name {
                Some(l) => format!("{} {l}", from.first_name),
                None => from.first_name.clone(),
            };
            let name = Some(full)
                .filter(|n| !n.trim().is_empty())
                .or_else(|| from.username.clone());
            (from.id.0.to_string(), name)
        }
    };
    let mut m = Inbound {
        sender,
        sender_name: sender_name
            .map(|n| clean_name(&n))
            .filter(|n| !n.is_empty()),
        text,
        external_id: Some(msg.id.0.to_string()),
        thread: topic.map(|t| t.to_string()),
        addressed,
        attachments: Vec::new(),
    };
    // A name the log refuses must not cost the message (a text over the
    // limit is the sequencer's to refuse, and to answer).
    if m.check_fields().is_err() {
        m.sender_name = None;
    }
    Decision::Take(Intake::New { folder, m })
}

/// Whether a group message calls the bot: a mention of its username, a
/// command addressed to it, a text mention of it, or a reply to one of
/// its messages.
fn addresses(msg: &teloxide_core::types::Message, me: &Identity) -> bool {
    let replied_to_me = msg
        .reply_to_message()
        .and_then(|r| r.from.as_ref())
        .is_some_and(|u| u.id.0 == me.id);
    if replied_to_me {
        return true;
    }
    let handle = format!("@{}", me.username).to_lowercase();
    let names_me = |e: &MessageEntityRef<'_>| match e.kind() {
        MessageEntityKind::Mention => !me.username.is_empty() && e.text().to_lowercase() == handle,
        MessageEntityKind::BotCommand => {
            !me.username.is_empty() && e.text().to_lowercase().ends_with(&handle)
        }
        MessageEntityKind::TextMention { user } => user.id.0 == me.id,
        _ => false,
    };
    msg.parse_entities()
        .into_iter()
        .chain(msg.parse_caption_entities())
        .flatten()
        .any(|e| names_me(&e))
}

/// The text a message is stored as: its text, or a short placeholder for
/// its media followed by its caption. None for service messages.
fn text_of(msg: &teloxide_core::types::Message) -> Option<String> {
    if let Some(t) = msg.text() {
        return Some(t.to_string());
    }
    let media = if msg.photo().is_some() {
        "[photo]".to_string()
    } else if msg.voice().is_some() {
        "[voice message]".to_string()
    } else if let Some(d) = msg.document() {
        match &d.file_name {
            Some(n) => format!("[document: {n}]"),
            None => "[document]".to_string(),
        }
    } else if msg.video().is_some() {
        "[video]".to_string()
    } else if msg.video_note().is_some() {
        "[video message]".to_string()
    } else if msg.animation().is_some() {
        "[GIF]".to_string()
    } else if let Some(a) = msg.audio() {
        match (&a.performer, &a.title) {
            (Some(p), Some(t)) => format!("[audio: {p} – {t}]"),
            (_, Some(t)) => format!("[audio: {t}]"),
            _ => "[audio]".to_string(),
        }
    } else if let Some(s) = msg.sticker() {
        match &s.emoji {
            Some(e) => format!("[sticker {e}]"),
            None => "[sticker]".to_string(),
        }
    } else if msg.location().is_some() {
        "[location]".to_string()
    } else if msg.contact().is_some() {
        "[contact]".to_string()
    } else if let Some(p) = msg.poll() {
        format!("[poll: {}]", p.question)
    } else {
        return None;
    };
    Some(match msg.caption() {
        Some(c) if !c.trim().is_empty() => format!("{media} {c}"),
        _ => media,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Identity {
        Identity {
            id: 999,
            username: "g2bot".into(),
        }
    }

    fn update(kind: &str, message: serde_json::Value) -> Update {
        let mut u = json!({ "update_id": 7 });
        u[kind] = message;
        // From text, as the client reads it (flattened fields need it).
        let u: Update = serde_json::from_str(&u.to_string()).unwrap();
        if let UpdateKind::Error(e) = &u.kind {
            panic!("not parsed: {e}");
        }
        u
    }

    fn message(
        chat: serde_json::Value,
        from: serde_json::Value,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let mut m = json!({ "message_id": 11, "date": 1_700_000_000, "chat": chat, "from": from });
        if let (Some(m), Some(e)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(e.clone());
        }
        m
    }

    fn group() -> serde_json::Value {
        json!({ "id": -100_123, "type": "supergroup", "title": "Fam", "is_forum": true })
    }

    fn alice() -> serde_json::Value {
        json!({ "id": 42, "is_bot": false, "first_name": "Alice", "last_name": "B\u{7}" })
    }

    fn groups() -> HashMap<String, GroupFolder> {
        HashMap::from([
            ("tg:-100123".to_string(), GroupFolder::new("fam").unwrap()),
            (
                "tg:-100123:5".to_string(),
                GroupFolder::new("trips").unwrap(),
            ),
        ])
    }

    fn taken(d: Decision) -> (GroupFolder, Inbound) {
        match d {
            Decision::Take(Intake::New { folder, m }) => (folder, m),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mentions_replies_and_private_chats_address_the_bot() {
        let mention = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "text": "@G2bot hello", "entities": [{ "type": "mention", "offset": 0, "length": 6 }] }),
            ),
        );
        let (folder, m) = taken(classify(&mention, &me(), &groups()));
        assert_eq!(folder, "fam");
        assert!(m.addressed);
        assert_eq!(
            (m.sender.as_str(), m.sender_name.as_deref()),
            ("42", Some("Alice B"))
        );
        assert_eq!(m.external_id.as_deref(), Some("11"));
        let other = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "text": "@someone hi", "entities": [{ "type": "mention", "offset": 0, "length": 8 }] }),
            ),
        );
        assert!(!taken(classify(&other, &me(), &groups())).1.addressed);
        let reply = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "text": "and?", "reply_to_message": message(group(), json!({ "id": 999, "is_bot": true, "first_name": "G2" }), json!({ "text": "hi" })) }),
            ),
        );
        assert!(taken(classify(&reply, &me(), &groups())).1.addressed);
        let private = update(
            "message",
            message(
                json!({ "id": 42, "type": "private", "first_name": "Alice" }),
                alice(),
                json!({ "text": "hi" }),
            ),
        );
        assert_eq!(
            classify(&private, &me(), &groups()),
            Decision::Unregistered {
                chat: 42,
                addressed: true
            }
        );
    }

    #[test]
    fn bots_media_topics_and_edits() {
        let own = update(
            "message",
            message(
                group(),
                json!({ "id": 999, "is_bot": true, "first_name": "G2" }),
                json!({ "text": "x" }),
            ),
        );
        assert!(matches!(
            classify(&own, &me(), &groups()),
            Decision::Skip(_)
        ));
        let bot = update(
            "message",
            message(
                group(),
                json!({ "id": 5, "is_bot": true, "first_name": "B" }),
                json!({ "text": "x" }),
            ),
        );
        assert!(matches!(
            classify(&bot, &me(), &groups()),
            Decision::Skip(_)
        ));
        let doc = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "document": { "file_id": "f", "file_unique_id": "u", "file_size": 10, "file_name": "plan.pdf" }, "caption": "read this" }),
            ),
        );
        assert_eq!(
            taken(classify(&doc, &me(), &groups())).1.text,
            "[document: plan.pdf] read this"
        );
        let voice = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "voice": { "file_id": "f", "file_unique_id": "u", "file_size": 10, "duration": 3, "mime_type": "audio/ogg" } }),
            ),
        );
        assert_eq!(
            taken(classify(&voice, &me(), &groups())).1.text,
            "[voice message]"
        );
        let in_topic = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "text": "t5", "message_thread_id": 5, "is_topic_message": true }),
            ),
        );
        assert_eq!(taken(classify(&in_topic, &me(), &groups())).0, "trips");
        let other_topic = update(
            "message",
            message(
                group(),
                alice(),
                json!({ "text": "t9", "message_thread_id": 9, "is_topic_message": true }),
            ),
        );
        let (f, m) = taken(classify(&other_topic, &me(), &groups()));
        assert_eq!((f.as_str(), m.thread.as_deref()), ("fam", Some("9")));
        let edit = update(
            "edited_message",
            message(
                group(),
                alice(),
                json!({ "text": "fixed", "edit_date": 1_700_000_100 }),
            ),
        );
        assert_eq!(
            classify(&edit, &me(), &groups()),
            Decision::Take(Intake::Edit {
                folder: GroupFolder::new("fam").unwrap(),
                external_id: "11".into(),
                text: "fixed".into(),
                addressed: false,
            })
        );
        let joined = update(
            "message",
            message(group(), alice(), json!({ "new_chat_members": [alice()] })),
        );
        assert!(matches!(
            classify(&joined, &me(), &groups()),
            Decision::Skip(_)
        ));
    }
}
