//! What a channel hands in ([`Intake`], with its progress [`Mark`]) and
//! how it is stored, in the sequencer's transaction: each item for its
//! group's chat; a text over the limit refused whole, a platform's chat
//! answered with a notice once per platform id ([`Taken::Refused`]); an
//! edit through [`edit`](super::edit), within the router's bound.

use std::sync::Arc;

use g2_core::validate::GroupFolder;

use super::{CheckInbound, Hooks, Inbound, Message, Refused, edit, store_outbound, too_long};
use crate::store::{self, Db};
use crate::{Error, Result};

/// What a channel hands in.
#[derive(Debug, Clone, PartialEq)]
pub enum Intake {
    /// A new message for a group's chat.
    New { folder: GroupFolder, m: Inbound },
    /// The platform edited a message it handed in before: the new text
    /// replaces the stored one while that is still pending (not handed to
    /// the agent); an answered message stays as it was answered.
    Edit {
        folder: GroupFolder,
        external_id: String,
        text: String,
        /// The edited message addresses the assistant (a mention added by
        /// the edit counts; one removed does not un-call it).
        addressed: bool,
    },
}

impl Intake {
    pub(super) fn folder(&self) -> &GroupFolder {
        match self {
            Intake::New { folder, .. } | Intake::Edit { folder, .. } => folder,
        }
    }
}

/// What became of one [`Intake`].
#[derive(Debug, Clone, PartialEq)]
pub enum Taken {
    Stored(Message),
    /// Its text is over the limit (`channels.max_text_bytes`): nothing of
    /// it was stored, and its platform chat was answered with this notice
    /// ([`too_long`](super::too_long)), sent by the channel that carries it.
    Refused(Message),
    /// Its platform id was stored before (handed in twice).
    Duplicate,
    /// An edit that replaced a pending message's text.
    Edited,
    /// An edit of a message that is answered, in flight, or unknown.
    Unchanged,
}

/// A channel's progress (a `router_state` key and value, such as the
/// next Telegram update to fetch), written in the transaction that
/// stores what it took in: a host killed at any point neither loses nor
/// takes in twice.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    pub key: String,
    pub value: String,
}

/// The text limit and who answers a refusal.
#[derive(Clone)]
pub(super) struct Limit {
    pub(super) max_text: usize,
    pub(super) assistant: Arc<str>,
}

/// Stores what a channel took in, in the caller's transaction, each item
/// for its group's chat (looked up once per group), then its mark. An item
/// for a group that is not registered is answered "not found", one that is
/// refused with why, and the rest are stored. A text over the limit in a
/// chat whose messages are not delivered by storing them (a platform's) is
/// answered with a notice, stored here ([`Taken::Refused`]).
pub(super) fn store_inbound(
    tx: &Db<'_>,
    hooks: &dyn Hooks,
    limit: &Limit,
    items: &[Intake],
    mark: Option<&Mark>,
) -> Result<Vec<Result<Taken>>> {
    let mut chats: Vec<(&GroupFolder, Option<(String, &'static str)>)> = Vec::new();
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let folder = item.folder();
        let chat = match chats.iter().find(|(f, _)| *f == folder) {
            Some((_, c)) => c.clone(),
            None => {
                let c =
                    store::groups::get(tx, folder)?.map(|g| (g.jid.clone(), hooks.channel(&g.jid)));
                chats.push((folder, c.clone()));
                c
            }
        };
        let Some((jid, channel)) = chat else {
            answers.push(Err(Error::NotFound(format!("group {folder:?}"))));
            continue;
        };
        let answers_in_chat = hooks.answers_in_chat(&jid);
        let max = limit.max_text;
        answers.push(match item {
            Intake::New { m, .. } => match m.check_within(max) {
                Ok(()) => Ok(store::messages::insert_inbound(tx, &jid, channel, m)?
                    .map_or(Taken::Duplicate, Taken::Stored)),
                Err(_) if answers_in_chat && m.text.len() > max && m.check_fields().is_ok() => {
                    let who = m.sender_name.as_deref();
                    let key = m.external_id.as_deref().map(|id| format!("refused:{id}"));
                    let text = too_long(who, Refused::Message, m.text.len(), max);
                    Ok(tell(tx, &jid, &limit.assistant, &text, key.as_deref())?
                        .map_or(Taken::Duplicate, Taken::Refused))
                }
                Err(e) => Err(e),
            },
            Intake::Edit {
                external_id,
                text,
                addressed,
                ..
            } => {
                // What an edit may still change is the router's to say.
                let settled = hooks.settled(tx, folder)?;
                let edited = edit(tx, &jid, external_id, text, *addressed, max, settled)?;
                if edited {
                    Ok(Taken::Edited)
                } else if answers_in_chat && text.len() > max {
                    match store::messages::by_external_id(tx, &jid, external_id)? {
                        Some(m) => {
                            let who = m.sender_name.as_deref();
                            let key = edit_key(external_id, text);
                            let text = too_long(who, Refused::Edit, text.len(), max);
                            Ok(tell(tx, &jid, &limit.assistant, &text, Some(&key))?
                                .map_or(Taken::Unchanged, Taken::Refused))
                        }
                        None => Ok(Taken::Unchanged),
                    }
                } else {
                    Ok(Taken::Unchanged)
                }
            }
        });
    }
    if let Some(mark) = mark {
        store::router_state::set(tx, &mark.key, &mark.value)?;
    }
    Ok(answers)
}

/// Stores a refusal's notice for the chat, as the assistant, once per
/// `key` (what it answers: Slack reports a mention twice, a webhook is
/// delivered again); None when it was answered before.
fn tell(
    tx: &Db<'_>,
    jid: &str,
    assistant: &str,
    text: &str,
    key: Option<&str>,
) -> Result<Option<Message>> {
    match key {
        Some(key) => store::messages::insert_notice_once(tx, jid, assistant, text, key),
        None => store_outbound(tx, jid, assistant, text, None, false).map(Some),
    }
}

/// The key of an edit's refusal: the message and the edit's text (a
/// digest: the same edit reported again is answered once, another edit
/// of the message answered too).
fn edit_key(external_id: &str, text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let short: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("refused-edit:{external_id}:{short}")
}
