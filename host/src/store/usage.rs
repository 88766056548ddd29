//! The `model_usage` table: one row per model request.

use rusqlite::{Connection, Transaction, params};

use crate::gateway::usage::{Line, Purpose, Record};
use crate::{Result, store};

pub fn insert(tx: &Transaction<'_>, r: &Record) -> Result<()> {
    tx.execute(
        "INSERT INTO model_usage (caller, provider, model, input_tokens, output_tokens,
             cache_read_tokens, cache_creation_tokens, duration_ms, status, outcome, streamed,
             started_at, day, purpose)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            r.caller,
            r.provider,
            r.model,
            r.tokens.input as i64,
            r.tokens.output as i64,
            r.tokens.cache_read as i64,
            r.tokens.cache_creation as i64,
            r.duration_ms as i64,
            r.status as i64,
            r.outcome.as_str(),
            r.streamed,
            r.started_at,
            r.day,
            r.purpose.as_str(),
        ],
    )?;
    Ok(())
}

/// Tokens a caller used on one UTC day, for one purpose or (None) all.
pub fn tokens_on(
    conn: &Connection,
    caller: &str,
    day: &str,
    purpose: Option<Purpose>,
) -> Result<u64> {
    let n: i64 = conn.query_row(
        "SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens), 0)
         FROM model_usage WHERE caller = ?1 AND day = ?2 AND (?3 IS NULL OR purpose = ?3)",
        params![caller, day, purpose.map(Purpose::as_str)],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as u64)
}

/// Usage per day, caller, purpose, provider and model, newest day first; `group`
/// limits to one caller, `since` to days on or after `YYYY-MM-DD`.
pub fn report(conn: &Connection, group: Option<&str>, since: Option<&str>) -> Result<Vec<Line>> {
    store::query_all(
        conn,
        "SELECT day, caller, purpose, provider, model, count(*), sum(input_tokens), sum(output_tokens),
                sum(cache_read_tokens), sum(cache_creation_tokens),
                sum(outcome = 'error'), sum(outcome = 'refused'), sum(duration_ms)
         FROM model_usage
         WHERE (?1 IS NULL OR caller = ?1) AND (?2 IS NULL OR day >= ?2)
         GROUP BY day, caller, purpose, provider, model
         ORDER BY day DESC, caller, purpose, provider, model",
        params![group, since],
        |r| {
            let n = |i: usize| -> rusqlite::Result<u64> { Ok(r.get::<_, i64>(i)?.max(0) as u64) };
            Ok(Line {
                day: r.get(0)?,
                group: r.get(1)?,
                purpose: Purpose::parse(&r.get::<_, String>(2)?),
                provider: r.get(3)?,
                model: r.get(4)?,
                requests: n(5)?,
                input_tokens: n(6)?,
                output_tokens: n(7)?,
                cache_read_tokens: n(8)?,
                cache_creation_tokens: n(9)?,
                errors: n(10)?,
                refused: n(11)?,
                total_duration_ms: n(12)?,
            })
        },
    )
}
