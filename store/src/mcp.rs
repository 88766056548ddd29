//! SQL of the MCP tokens (`mcp_tokens`: one group each, kept as a hash)
//! and of the tool calls made with them (`mcp_calls`, the group's usage
//! from outside). Issuing, checking and expiring tokens are the host's
//! `mcp` module's; this is their rows.

use serde::Serialize;

use crate::db::{Db, Optional};
use crate::params;

use super::{Result, now_rfc3339};

/// A token's row (its hash included, for the caller's constant-time
/// comparison; never shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenRow {
    pub id: i64,
    pub group: String,
    pub name: String,
    #[serde(skip)]
    pub hash: String,
    /// The token's first characters, to tell tokens apart.
    pub prefix: String,
    /// `read` or `write`.
    pub scope: String,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub revoked_at: Option<String>,
    pub last_used_at: Option<String>,
}

/// A token about to be stored.
#[derive(Debug, Clone)]
pub struct NewToken<'a> {
    pub group: &'a str,
    pub name: &'a str,
    pub hash: &'a str,
    pub prefix: &'a str,
    pub scope: &'a str,
    pub expires_at: Option<&'a str>,
}

const COLUMNS: &str =
    "id, group_folder, name, hash, prefix, scope, created_at, expires_at, revoked_at, last_used_at";

fn token_row(r: &crate::Row<'_>) -> Result<TokenRow> {
    Ok(TokenRow {
        id: r.get(0)?,
        group: r.get(1)?,
        name: r.get(2)?,
        hash: r.get(3)?,
        prefix: r.get(4)?,
        scope: r.get(5)?,
        created_at: r.get(6)?,
        expires_at: r.get(7)?,
        revoked_at: r.get(8)?,
        last_used_at: r.get(9)?,
    })
}

/// Stores a token; its id.
pub fn insert_token(tx: &Db<'_>, t: &NewToken<'_>) -> Result<i64> {
    tx.query_row(
        "INSERT INTO mcp_tokens (group_folder, name, hash, prefix, scope, created_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
        params![
            t.group,
            t.name,
            t.hash,
            t.prefix,
            t.scope,
            now_rfc3339(),
            t.expires_at
        ],
        |r| r.get(0),
    )
}

/// Lookups of a token by its hash since the process started (`GET
/// /api/host` shows them, so a benchmark can count them per call).
static LOOKUPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many times [`token_by_hash`] ran in this process.
pub fn lookups() -> u64 {
    LOOKUPS.load(std::sync::atomic::Ordering::Relaxed)
}

/// The token whose hash is `hash` (one indexed lookup), revoked or not.
pub fn token_by_hash(conn: &Db<'_>, hash: &str) -> Result<Option<TokenRow>> {
    LOOKUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM mcp_tokens WHERE hash = ?1"),
        [hash],
        token_row,
    )
    .optional()
}

/// Token `id`.
pub fn token(conn: &Db<'_>, id: i64) -> Result<Option<TokenRow>> {
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM mcp_tokens WHERE id = ?1"),
        params![id],
        token_row,
    )
    .optional()
}

/// Every token (of `group` when given), oldest first.
pub fn tokens(conn: &Db<'_>, group: Option<&str>) -> Result<Vec<TokenRow>> {
    conn.query_all(
        &format!(
            "SELECT {COLUMNS} FROM mcp_tokens WHERE CAST(?1 AS TEXT) IS NULL OR group_folder = ?1 ORDER BY id"
        ),
        params![group],
        token_row,
    )
}

/// Revokes token `id` now: the token as it is then. An unknown id is
/// `NotFound`, a token revoked already a `Conflict`.
pub fn revoke(tx: &Db<'_>, id: i64) -> Result<TokenRow> {
    let n = tx.execute(
        "UPDATE mcp_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
        params![id, now_rfc3339()],
    )?;
    let row = token(tx, id)?.ok_or_else(|| crate::Error::NotFound(format!("MCP token {id}")))?;
    if n == 0 {
        return Err(crate::Error::Conflict(format!(
            "MCP token {id} was revoked already"
        )));
    }
    Ok(row)
}

/// One tool call made with a token.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    pub group: &'a str,
    pub token_id: i64,
    pub token_name: &'a str,
    pub tool: &'a str,
    /// `ok`, `refused` or `failed`.
    pub outcome: &'a str,
    pub duration_ms: u64,
}

/// Records a call and marks its token used.
pub fn record_call(tx: &Db<'_>, c: &Call<'_>) -> Result<()> {
    let at = now_rfc3339();
    tx.execute(
        "INSERT INTO mcp_calls (group_folder, token_id, token_name, tool, outcome, duration_ms, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            c.group,
            c.token_id,
            c.token_name,
            c.tool,
            c.outcome,
            i64::try_from(c.duration_ms).unwrap_or(i64::MAX),
            at.as_str()
        ],
    )?;
    tx.execute(
        "UPDATE mcp_tokens SET last_used_at = ?2 WHERE id = ?1",
        params![c.token_id, at.as_str()],
    )?;
    Ok(())
}

/// Calls per day, group, token (by id: two tokens may share a name) and
/// tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallLine {
    pub day: String,
    pub group: String,
    pub token_id: i64,
    pub token: String,
    pub tool: String,
    pub calls: u64,
    pub refused: u64,
    pub failed: u64,
    pub total_duration_ms: u64,
}

/// The calls since `since` (a day, `YYYY-MM-DD`), of `group` when given,
/// newest day first.
pub fn report(conn: &Db<'_>, group: Option<&str>, since: Option<&str>) -> Result<Vec<CallLine>> {
    conn.query_all(
        "SELECT substr(at, 1, 10) AS day, group_folder, token_id, token_name, tool, count(*),
                count(*) FILTER (WHERE outcome = 'refused'), count(*) FILTER (WHERE outcome = 'failed'),
                sum(duration_ms)
         FROM mcp_calls
         WHERE (CAST(?1 AS TEXT) IS NULL OR group_folder = ?1) AND (CAST(?2 AS TEXT) IS NULL OR at >= ?2)
         GROUP BY substr(at, 1, 10), group_folder, token_id, token_name, tool
         ORDER BY day DESC, group_folder, token_name, token_id, tool",
        params![group, since],
        |r| {
            let n = |i: usize| -> Result<u64> { Ok(r.get::<i64>(i)?.max(0) as u64) };
            Ok(CallLine {
                day: r.get(0)?,
                group: r.get(1)?,
                token_id: r.get(2)?,
                token: r.get(3)?,
                tool: r.get(4)?,
                calls: n(5)?,
                refused: n(6)?,
                failed: n(7)?,
                total_duration_ms: n(8)?,
            })
        },
    )
}
