//! The `model_usage` table: one row per model request the gateway
//! answered or refused, and the sums behind per-group daily budgets and
//! `g2 usage`; with its rows ([`Record`], [`Line`]).

use crate::db::Db;
use crate::params;
use serde::{Deserialize, Serialize};

use super::{Result, query_all};

/// Caller recorded for requests on the loopback TCP listener. `@` is not
/// allowed in folder names, so this never collides with a group.
pub const LOCAL_CALLER: &str = "@local";

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The provider answered with success and the answer was delivered.
    Ok,
    /// The provider (or the gateway) answered with an error.
    Error,
    /// Refused by a budget or concurrency limit before reaching a provider.
    Refused,
    /// The caller went away before the answer was complete.
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Refused => "refused",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// What a model request was for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Purpose {
    /// An agent's turn (a group's socket, or the loopback listener).
    #[default]
    Agent,
    /// The host extracting a group's memory (`memory::extract`).
    Memory,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Agent => "agent",
            Purpose::Memory => "memory",
        }
    }

    pub fn parse(s: &str) -> Purpose {
        if s == "memory" {
            Purpose::Memory
        } else {
            Purpose::Agent
        }
    }
}

/// Token counts as reported in an Anthropic `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_creation: u64,
}

impl Tokens {
    /// What counts against a daily budget.
    pub fn billable(&self) -> u64 {
        self.input + self.output + self.cache_read + self.cache_creation
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub caller: String,
    pub purpose: Purpose,
    pub provider: String,
    pub model: String,
    pub tokens: Tokens,
    pub duration_ms: u64,
    pub status: u16,
    pub outcome: Outcome,
    pub streamed: bool,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// UTC day, `YYYY-MM-DD`.
    pub day: String,
}

/// One line of `g2 usage`: a caller's use of one model on one day. This is
/// also the stable `--json` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub day: String,
    /// Group folder, or `@local` for the loopback listener.
    pub group: String,
    /// `agent` or `memory`.
    pub purpose: Purpose,
    pub provider: String,
    pub model: String,
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    /// Requests that ended in an error answer.
    pub errors: u64,
    /// Requests refused by a budget or concurrency limit.
    pub refused: u64,
    pub total_duration_ms: u64,
}

/// Today's UTC day as stored in `day`.
pub fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// The first UTC day of a report over the last `days` days, today
/// included (`days` below 1 counts as 1): the `since` of [`report`], for
/// `g2 usage --days` and the API's `?days=`.
pub fn since(days: u32) -> String {
    since_on(chrono::Utc::now().date_naive(), days)
}

fn since_on(today: chrono::NaiveDate, days: u32) -> String {
    let back = chrono::Days::new(u64::from(days.max(1)) - 1);
    // Further back than chrono's calendar reaches: every day is included.
    today
        .checked_sub_days(back)
        .unwrap_or(chrono::NaiveDate::MIN)
        .format("%Y-%m-%d")
        .to_string()
}

pub fn insert(tx: &Db<'_>, r: &Record) -> Result<()> {
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
pub fn tokens_on(conn: &Db<'_>, caller: &str, day: &str, purpose: Option<Purpose>) -> Result<u64> {
    let n: i64 = conn.query_row(
        "SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_creation_tokens), 0)
         FROM model_usage WHERE caller = ?1 AND day = ?2 AND (CAST(?3 AS TEXT) IS NULL OR purpose = ?3)",
        params![caller, day, purpose.map(Purpose::as_str)],
        |r| r.get(0),
    )?;
    Ok(n.max(0) as u64)
}

/// Usage per day, caller, purpose, provider and model, newest day first; `group`
/// limits to one caller, `since` to days on or after `YYYY-MM-DD`.
pub fn report(conn: &Db<'_>, group: Option<&str>, since: Option<&str>) -> Result<Vec<Line>> {
    query_all(
        conn,
        "SELECT day, caller, purpose, provider, model, count(*), sum(input_tokens), sum(output_tokens),
                sum(cache_read_tokens), sum(cache_creation_tokens),
                count(*) FILTER (WHERE outcome = 'error'), count(*) FILTER (WHERE outcome = 'refused'),
                sum(duration_ms)
         FROM model_usage
         WHERE (CAST(?1 AS TEXT) IS NULL OR caller = ?1) AND (CAST(?2 AS TEXT) IS NULL OR day >= ?2)
         GROUP BY day, caller, purpose, provider, model
         ORDER BY day DESC, caller, purpose, provider, model",
        params![group, since],
        |r| {
            let n = |i: usize| -> Result<u64> { Ok(r.get::<i64>(i)?.max(0) as u64) };
            Ok(Line {
                day: r.get(0)?,
                group: r.get(1)?,
                purpose: Purpose::parse(&r.get::<String>(2)?),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_counts_today_as_the_first_day() {
        let today = chrono::NaiveDate::from_ymd_opt(2026, 3, 1).unwrap();
        assert_eq!(since_on(today, 1), "2026-03-01");
        assert_eq!(since_on(today, 0), "2026-03-01", "at least today");
        assert_eq!(since_on(today, 2), "2026-02-28");
        assert_eq!(since_on(today, 30), "2026-01-31");
        // Every stored day sorts after the earliest date there is.
        assert!(since_on(today, u32::MAX).as_str() < "0000-01-01");
    }
}
