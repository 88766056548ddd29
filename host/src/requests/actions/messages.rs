//! `send_message`: to the group's own chat, or (main only) to any known
//! chat; sent through the channels as the assistant.

use crate::groups::Group;
use crate::requests::RequestServer;
use crate::requests::authorize::{self, Family};
use crate::{Error, Result};

impl RequestServer {
    pub(super) async fn send_message(
        &self,
        me: &Group,
        text: &str,
        chat_jid: Option<String>,
    ) -> Result<String> {
        let target = chat_jid.unwrap_or_else(|| me.jid.clone());
        if target != me.jid {
            authorize::check(me, Family::Messages, false, || {
                format!(
                    "group {} may only send to its own chat, not to {target}",
                    me.folder
                )
            })?;
            let t = target.clone();
            let known = self
                .store
                .read(move |c| crate::store::requests::known_chat(c, &t))
                .await?;
            if !known {
                return Err(Error::NotFound(format!("chat {target:?}")));
            }
        }
        if text.trim().is_empty() {
            return Err(Error::Invalid("text must not be empty".into()));
        }
        // The limit of every channel, so nothing an agent sends is cut.
        crate::messages::check_length(text, self.links.channels.max_text())?;
        match self
            .links
            .channels
            .say(&target, &self.links.assistant_name, text)
            .await?
        {
            Some(_) => Ok(format!("Sent to {target}.")),
            None => Ok("Nothing to send once internal notes are removed.".into()),
        }
    }
}
