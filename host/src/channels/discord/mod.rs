//! Discord: a bot in servers' text channels, threads and direct messages,
//! through Discord's gateway (events in) and REST API (messages out).
//!
//! - **Chats.** Each Discord channel or thread is a group: `dc:<channel
//!   id>` ([`Jid`]). In a direct message every message addresses the
//!   assistant; in a server, a mention of the bot or a reply to one of its
//!   messages.
//! - **Inbound** ([`gateway`]): one shard of `twilight-gateway` (identify,
//!   heartbeats, resume after a drop with the session id and sequence, close
//!   codes). Messages for registered channels are stored with the session
//!   and its sequence in the same transaction, so a restarted host resumes
//!   the session where it stored last and Discord replays what came since.
//! - **Outbound** (`rest`): a message is split to 2,000 characters
//!   (Discord renders the agent's Markdown itself), each part POSTed to
//!   `/channels/{id}/messages`, the first replying to the message that woke
//!   the agent, with no mention allowed to ping (`allowed_mentions`). A 429
//!   is waited out for its `retry_after`; a bucket the headers say is
//!   spent (`X-RateLimit-Remaining: 0`) is waited out before the next send
//!   to that channel; a channel the bot lost marks its group failing.
//! - **Files** ([`files`]): a message's attachments (a voice message's
//!   sound too) are fetched from Discord's CDN (signed URLs, no token) up
//!   to `media.max_bytes` and kept with the message before it is stored;
//!   what was not kept is named in it and told to the channel.
//!
//! The bot token is read from [`TOKEN_VARIABLE`] (the environment or
//! `{home}/.env`), kept in a [`Secret`], and never logged.

pub mod files;
pub mod gateway;
pub mod rest;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::platform::{About, Platform, Sent};
use super::{Channels, Secret, SendError};
use crate::Result;
use crate::background::Background;
use crate::config::DiscordSettings;
use crate::gateway::credentials::SecretVariable;
use crate::messages::Message;
use crate::store::Store;

/// Where the bot token is read from (the environment, then `{home}/.env`).
pub const TOKEN_VARIABLE: &str = "DISCORD_BOT_TOKEN";
inventory::submit! { SecretVariable(TOKEN_VARIABLE) }
pub use crate::jid::{DISCORD_PREFIX as PREFIX, DiscordJid as Jid};
pub use rest::Rest;
/// The channel's name, stored with its chats.
const NAME: &str = "discord";
/// The longest message Discord takes, in characters.
pub const MAX_CHARS: usize = 2000;

/// The bot token from the environment or `{home}/.env`.
pub fn token(home: &Path) -> Option<Secret> {
    Secret::find(home, TOKEN_VARIABLE)
}

/// The Discord channel.
pub struct Discord {
    rest: Rest,
    /// Attachments' downloads (no token: the CDN's URLs are signed).
    cdn: files::Cdn,
    token: Secret,
    settings: DiscordSettings,
    store: Store,
    /// Per channel: no send before this instant (its rate-limit bucket was
    /// spent, as the last answer's headers said).
    not_before: Mutex<HashMap<u64, Instant>>,
}

impl Discord {
    pub fn new(settings: &DiscordSettings, token: Secret, store: Store) -> Result<Arc<Discord>> {
        Ok(Arc::new(Discord {
            rest: Rest::new(settings, token.clone())?,
            cdn: files::Cdn::new()?,
            token,
            settings: settings.clone(),
            store,
            not_before: Mutex::new(HashMap::new()),
        }))
    }

    /// Starts the gateway's loop: messages in, for as long as the host runs.
    pub fn start(self: &Arc<Self>, channels: Channels) -> Background {
        let dc = self.clone();
        Background::spawn(move |stop| gateway::run(dc, channels, stop))
    }
}

/// The parts of a message: Markdown split to Discord's limit.
pub fn split(markdown: &str) -> Vec<String> {
    super::split::split(markdown, MAX_CHARS, &|s| s.chars().count() <= MAX_CHARS)
}

impl Platform for Discord {
    type Jid = Jid;
    const ABOUT: About<Jid> = About::new(NAME, PREFIX, "Discord channel", Jid::parse, split);

    async fn send_to(&self, m: &Message, part: usize, jid: Jid, text: &str) -> Sent {
        // A spent bucket: wait (the outbox holds this chat's parts).
        let wait = self
            .not_before
            .lock()
            .expect("not_before")
            .get(&jid.0)
            .and_then(|t| t.checked_duration_since(Instant::now()));
        if let Some(w) = wait {
            return Err(SendError::RetryAfter(w));
        }
        // The first part replies to what it answers.
        let reply_to = match part {
            0 => super::answered(&self.store, m)
                .await?
                .and_then(|r| r.external_id)
                .and_then(|id| id.parse::<u64>().ok()),
            _ => None,
        };
        let sent = self
            .rest
            .create_message(jid.0, text, reply_to)
            .await
            .map_err(rest::send_error)?;
        if let Some(reset) = sent.bucket_spent_for {
            self.not_before
                .lock()
                .expect("not_before")
                .insert(jid.0, Instant::now() + reset);
        }
        Ok(sent.id)
    }

    async fn typing_in(&self, jid: Jid) {
        if let Err(e) = self.rest.typing(jid.0).await {
            tracing::debug!(chat = %jid, error = %e, "discord: typing");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_replies_split_to_discords_limit_in_order() {
        let para = "word ".repeat(150);
        let text = format!(
            "{para}\n\n```rust\n{}\n```\n\n{para}",
            "let x = 1;\n".repeat(300)
        );
        let parts = split(&text);
        assert!(parts.len() > 2, "{}", parts.len());
        assert!(parts.iter().all(|p| p.chars().count() <= MAX_CHARS));
        assert!(parts[0].starts_with("word"));
        assert!(parts.last().unwrap().trim_end().ends_with("word"));
        // Code keeps its fences in every piece.
        assert!(parts[1].starts_with("```"));
        assert_eq!(split("short"), vec!["short".to_string()]);
    }
}
