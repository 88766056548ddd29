//! The tokens of `/mcp`: issued for one group each, with a scope (`read`,
//! or `write`, which adds remembering and forgetting) and perhaps an
//! expiry; shown once when issued and kept only as their SHA-256.
//!
//! A token is `g2mcp_` and 64 hex digits (244 random bits: two v4 UUIDs),
//! so a hash without a salt or a slow function is enough: nothing about a
//! token can be guessed from its hash. [`check`] finds a presented token by
//! its hash (one indexed lookup) and compares the stored hash in constant
//! time; a revoked or expired token is refused with that reason.

use sha2::{Digest, Sha256};

use crate::store::{self, Store};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

pub use crate::store::mcp::TokenRow;

/// What every token starts with (and how it is recognised in a leak).
pub const PREFIX: &str = "g2mcp_";
/// Characters of a token kept to tell tokens apart (`g2mcp_` and 6 more).
const SHOWN: usize = PREFIX.len() + 6;
/// The longest token name.
pub const MAX_NAME: usize = 64;
/// The longest expiry, in days (a hundred years; times stay in RFC 3339's
/// four-digit years, which sort as they compare).
pub const MAX_DAYS: u32 = 36_500;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Search and read the group's memory and archives.
    Read,
    /// Read, and remember and forget.
    Write,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }
}

/// Who calls `/mcp`: the token's group, name and scope. The group is the
/// token's, never anything a call names.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: i64,
    pub name: String,
    pub group: GroupFolder,
    pub scope: Scope,
}

/// A token just issued: the token itself (shown once) and its row.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub row: TokenRow,
}

/// SHA-256 of a token, hex.
fn hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Issues a token for registered group `folder`.
pub async fn issue(
    store: &Store,
    folder: &GroupFolder,
    name: Option<&str>,
    scope: Scope,
    expires_days: Option<u32>,
) -> Result<Issued> {
    crate::groups::require(store, folder).await?;
    let name = match name.map(str::trim) {
        Some(n)
            if n.is_empty() || n.chars().count() > MAX_NAME || n.chars().any(char::is_control) =>
        {
            return Err(Error::Invalid(format!(
                "a token's name is 1 to {MAX_NAME} characters without control characters"
            )));
        }
        Some(n) => n.to_string(),
        None => format!("{folder}-{}", chrono::Utc::now().format("%Y%m%d-%H%M%S")),
    };
    let expires_at = match expires_days {
        Some(d) if !(1..=MAX_DAYS).contains(&d) => {
            return Err(Error::Invalid(format!(
                "--expires takes 1 to {MAX_DAYS} days (leave it out for no expiry)"
            )));
        }
        Some(d) => Some(
            (chrono::Utc::now() + chrono::Duration::days(i64::from(d)))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        None => None,
    };
    let token = format!(
        "{PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let (h, shown) = (hash(&token), token[..SHOWN].to_string());
    let group = folder.to_string();
    let row = store
        .write(move |tx| {
            let id = store::mcp::insert_token(
                tx,
                &store::mcp::NewToken {
                    group: &group,
                    name: &name,
                    hash: &h,
                    prefix: &shown,
                    scope: scope.as_str(),
                    expires_at: expires_at.as_deref(),
                },
            )?;
            store::mcp::token(tx, id)?.ok_or_else(|| Error::NotFound(format!("token {id}")))
        })
        .await?;
    Ok(Issued { token, row })
}

/// Every token (of `folder` when given), oldest first.
pub async fn list(store: &Store, folder: Option<&GroupFolder>) -> Result<Vec<TokenRow>> {
    let f = folder.map(ToString::to_string);
    store
        .read(move |c| store::mcp::tokens(c, f.as_deref()))
        .await
}

/// Revokes token `id`: the next call made with it is refused. An unknown
/// id is `NotFound`, a token revoked already a `Conflict`.
pub async fn revoke(store: &Store, id: i64) -> Result<TokenRow> {
    store.write(move |tx| store::mcp::revoke(tx, id)).await
}

/// A token's state at `now` (RFC 3339, as stored): `live`, `revoked` or
/// `expired`.
pub fn state(t: &TokenRow, now: &str) -> &'static str {
    if t.revoked_at.is_some() {
        "revoked"
    } else if t.expires_at.as_deref().is_some_and(|at| at <= now) {
        "expired"
    } else {
        "live"
    }
}

/// Why a presented token does not let its client in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token has this hash.
    Unknown,
    Revoked,
    Expired(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Unknown => write!(f, "that is not an MCP token of this host"),
            Refusal::Revoked => write!(f, "this MCP token was revoked"),
            Refusal::Expired(at) => write!(f, "this MCP token expired at {at}"),
        }
    }
}

/// The caller a presented token stands for, or why it does not stand for
/// one. `Err` is the store's failure.
pub async fn check(store: &Store, given: &str) -> Result<std::result::Result<Caller, Refusal>> {
    let h = hash(given);
    let row = {
        let h = h.clone();
        store
            .read(move |c| store::mcp::token_by_hash(c, &h))
            .await?
    };
    Ok(judge(row, &h, &crate::now_rfc3339()))
}

/// [`check`]'s decision on the row found for hash `h`, at `now`.
fn judge(row: Option<TokenRow>, h: &str, now: &str) -> std::result::Result<Caller, Refusal> {
    let Some(row) = row.filter(|r| crate::http::same_secret(&r.hash, h)) else {
        return Err(Refusal::Unknown);
    };
    if row.revoked_at.is_some() {
        return Err(Refusal::Revoked);
    }
    if let Some(at) = row.expires_at.filter(|at| at.as_str() <= now) {
        return Err(Refusal::Expired(at));
    }
    let group = GroupFolder::new(row.group).map_err(|_| Refusal::Unknown)?;
    Ok(Caller {
        token_id: row.id,
        name: row.name,
        group,
        scope: if row.scope == "write" {
            Scope::Write
        } else {
            Scope::Read
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(revoked: Option<&str>, expires: Option<&str>) -> TokenRow {
        TokenRow {
            id: 3,
            group: "family".into(),
            name: "laptop".into(),
            hash: hash("g2mcp_x"),
            prefix: "g2mcp_x".into(),
            scope: "write".into(),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            expires_at: expires.map(str::to_string),
            revoked_at: revoked.map(str::to_string),
            last_used_at: None,
        }
    }

    #[test]
    fn a_token_lets_in_its_own_group_until_revoked_or_expired() {
        let now = "2026-06-01T00:00:00.000Z";
        let h = hash("g2mcp_x");
        let ok = judge(Some(row(None, Some("2026-06-02T00:00:00.000Z"))), &h, now).unwrap();
        assert_eq!(
            (ok.group.as_str(), ok.scope, ok.token_id),
            ("family", Scope::Write, 3)
        );
        assert_eq!(judge(None, &h, now).unwrap_err(), Refusal::Unknown);
        // A row whose hash differs (never from the lookup, but checked).
        assert_eq!(
            judge(Some(row(None, None)), &hash("g2mcp_y"), now).unwrap_err(),
            Refusal::Unknown
        );
        assert_eq!(
            judge(Some(row(Some(now), None)), &h, now).unwrap_err(),
            Refusal::Revoked
        );
        assert_eq!(
            judge(Some(row(None, Some(now))), &h, now).unwrap_err(),
            Refusal::Expired(now.into())
        );
    }

    #[test]
    fn a_token_is_live_until_revoked_or_expired() {
        let now = "2026-06-01T00:00:00.000Z";
        assert_eq!(state(&row(None, None), now), "live");
        assert_eq!(
            state(&row(None, Some("2026-06-02T00:00:00.000Z")), now),
            "live"
        );
        assert_eq!(state(&row(None, Some(now)), now), "expired");
        assert_eq!(state(&row(Some(now), Some(now)), now), "revoked");
    }

    #[test]
    fn a_hash_is_the_tokens_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
