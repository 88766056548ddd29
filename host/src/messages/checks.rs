//! What the log takes in: the checks an [`Inbound`] passes before it is
//! stored, the text limit (`channels.max_text_bytes`) and what a chat is
//! told when a text is over it ([`too_long`]), and an HTTP client's
//! `Idempotency-Key`.

use crate::{Error, Result};

use super::Inbound;

/// An `Idempotency-Key` header's value as the message's platform id in
/// its chat (`http:` and the key): 1-200 visible ASCII characters.
pub fn idempotency_key(raw: &[u8]) -> Result<String> {
    let ok = (1..=200).contains(&raw.len()) && raw.iter().all(u8::is_ascii_graphic);
    if !ok {
        return Err(Error::Invalid(
            "Idempotency-Key: 1-200 visible ASCII characters".into(),
        ));
    }
    Ok(format!("http:{}", String::from_utf8_lossy(raw)))
}

/// The longest message text accepted unless the host is told otherwise:
/// the default of `channels.max_text_bytes`, which the log carries
/// ([`Log::max_text`](super::Log::max_text)) and every check of a
/// message's text takes.
pub const MAX_TEXT: usize = crate::config::ChannelSettings::MAX_TEXT_BYTES;
/// Longest sender id or name.
const MAX_SENDER: usize = 200;

/// Refuses a text longer than `max_text` bytes, naming its size, the
/// limit and the setting (what an HTTP client and the logs are told).
pub fn check_length(text: &str, max_text: usize) -> Result<()> {
    if text.len() > max_text {
        return Err(Error::Invalid(format!(
            "text: {} bytes, over the limit of {max_text} bytes (channels.max_text_bytes)",
            text.len()
        )));
    }
    Ok(())
}

/// The checks an [`Inbound`] passes before it is stored (a channel runs
/// them; `store::messages::insert_inbound` takes what passed).
pub trait CheckInbound {
    /// Every check but the text's length: a sender, a name the log takes,
    /// a text that says something. What a platform runs before it hands a
    /// message in: the sequencer refuses one over the limit and tells its
    /// chat why.
    fn check_fields(&self) -> Result<()>;

    /// Every check, with texts of at most `max_text` bytes.
    fn check_within(&self, max_text: usize) -> Result<()>;

    /// Every check with the default limit, [`MAX_TEXT`].
    fn check(&self) -> Result<()> {
        self.check_within(MAX_TEXT)
    }
}

impl CheckInbound for Inbound {
    fn check_fields(&self) -> Result<()> {
        let bad = |why: &str| Err(Error::Invalid(why.to_string()));
        if self.sender.trim().is_empty() || self.sender.len() > MAX_SENDER {
            return bad("sender: 1-200 characters");
        }
        crate::terminal::check_name("sender", &self.sender)?;
        if let Some(name) = &self.sender_name {
            if name.len() > MAX_SENDER {
                return bad("sender_name: at most 200 characters");
            }
            crate::terminal::check_name("sender_name", name)?;
        }
        if self.text.trim().is_empty() {
            return bad("text must not be empty");
        }
        Ok(())
    }

    fn check_within(&self, max_text: usize) -> Result<()> {
        self.check_fields()?;
        check_length(&self.text, max_text)
    }
}

/// What a refused text was: a new message, or an edit of one in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Message,
    Edit,
}

/// The notice that a text of `bytes` was refused, the limit being
/// `limit` bytes: who sent it (their display name, when known), the two
/// sizes (in KiB when the limit is a whole number of them, the text's
/// rounded up so it never reads as fitting), and what to do instead.
pub fn too_long(who: Option<&str>, what: Refused, bytes: usize, limit: usize) -> String {
    const KIB: usize = 1024;
    let (size, max) = if limit.is_multiple_of(KIB) {
        (
            format!("{} KiB", bytes.div_ceil(KIB)),
            format!("{} KiB", limit / KIB),
        )
    } else {
        (format!("{bytes} bytes"), format!("{limit} bytes"))
    };
    let from = who.map(|w| format!(" from {w}")).unwrap_or_default();
    match what {
        Refused::Message => format!(
            "A message{from} was not passed on: it is {size} and g2 takes messages up to {max}. \
             Please send it shorter or as a file."
        ),
        Refused::Edit => format!(
            "An edit{from} was not passed on: it is {size} and g2 takes messages up to {max}, \
             so the message stays as it was first sent."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(text: &str) -> Inbound {
        Inbound {
            sender: "ann".into(),
            sender_name: Some("Ann".into()),
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_text_limit_is_the_one_given_and_named_when_refused() {
        let at = from(&"é".repeat(512)); // 1024 bytes, 512 characters
        assert!(at.check_within(1024).is_ok());
        let over = from(&format!("{}x", "é".repeat(512)));
        let e = over.check_within(1024).unwrap_err().to_string();
        assert!(
            e.contains("1025 bytes")
                && e.contains("limit of 1024 bytes")
                && e.contains("channels.max_text_bytes"),
            "{e}"
        );
        assert!(!e.contains('é'), "the text itself is not repeated: {e}");
        // The fields alone pass whatever the length; the default is 32 KiB.
        let long = from(&"x".repeat(MAX_TEXT + 1));
        assert!(long.check_fields().is_ok());
        assert!(long.check().is_err() && from(&"x".repeat(MAX_TEXT)).check().is_ok());
        // The other checks hold whatever the limit.
        assert!(from(" \n").check_within(usize::MAX).is_err());
        let mut nameless = from("hi");
        nameless.sender = " ".into();
        assert!(nameless.check_fields().is_err());
    }

    #[test]
    fn a_text_over_the_limit_is_answered_with_both_sizes() {
        assert_eq!(
            too_long(Some("Ann"), Refused::Message, 40 * 1024, 32 * 1024),
            "A message from Ann was not passed on: it is 40 KiB and g2 takes messages up to 32 KiB. \
             Please send it shorter or as a file."
        );
        // One byte over reads as over, not as the limit.
        let t = too_long(None, Refused::Message, 1025, 1024);
        assert!(
            t.starts_with(
                "A message was not passed on: it is 2 KiB and g2 takes messages up to 1 KiB."
            ),
            "{t}"
        );
        let t = too_long(Some("Bo"), Refused::Edit, 1600, 1500);
        assert!(
            t.starts_with("An edit from Bo was not passed on: it is 1600 bytes and g2 takes messages up to 1500 bytes, so the message stays as it was"),
            "{t}"
        );
    }
}
