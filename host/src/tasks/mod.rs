//! Scheduled tasks: prompts a group's agent runs on a schedule, and the log
//! of their runs. The schedule rules live here (their statements are in
//! `store::tasks`); [`scheduler`] is the loop that sleeps until [`next_due`]
//! and hands what [`claim_due`] claims to the queue, and [`runs`] records a
//! run once its container exited.
//!
//! A schedule is `cron` (5 fields, evaluated on the wall clock of the task's
//! IANA timezone, so daylight saving time moves the instant, not the local
//! time), `interval` (milliseconds, at least 1000, counted from the claim of
//! the previous run) or `once` (RFC 3339 with an offset, or a local time in
//! the task's timezone).
//!
//! Invariants:
//! - Timestamps are RFC 3339, UTC, milliseconds (as [`crate::now_rfc3339`]),
//!   so comparing the strings orders the instants.
//! - A task is run by at most one claimer at a time: [`claim_due`] sets
//!   `claimed_by` only where it is NULL; [`finish`] and [`release_claims`]
//!   clear it.
//! - Claiming advances `next_run` to the following run counted from the
//!   claim time: a host that was down fires a missed task once, not once per
//!   missed slot. A claimed `once` task has `next_run` NULL, and is
//!   `completed` when its run finished.
//! - Status moves: active ⇄ paused; any status but cancelled → cancelled.
//!   A task cancelled while it runs stays cancelled.
//! - A caller restricted to one group sees another group's task as missing
//!   (`NotFound`, the same error as an unknown id), never as forbidden.

pub mod runs;
pub mod scheduler;

use crate::store::db::Db;
use chrono::{DateTime, LocalResult, NaiveDateTime, SecondsFormat, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

use crate::store::Store;
use crate::{Error, Result, store};
use g2_core::validate::GroupFolder;

pub use crate::store::tasks::{Task, TaskRun};

/// Longest prompt accepted, in bytes.
pub const MAX_PROMPT: usize = 16 * 1024;
/// Shortest interval, in milliseconds.
pub const MIN_INTERVAL_MS: i64 = 1_000;
/// `last_result` keeps this many characters of a run's result.
pub const MAX_LAST_RESULT_CHARS: usize = 2_000;
/// A run log row keeps this many characters of a result or error.
const MAX_LOG_CHARS: usize = 16 * 1024;
/// Longest schedule value (cron expression, interval, time).
const MAX_SCHEDULE_VALUE: usize = 200;
/// Longest chat jid.
const MAX_JID: usize = 512;

/// What [`create`] needs; the rest gets defaults.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub group_folder: String,
    pub chat_jid: String,
    pub prompt: String,
    pub schedule_type: String,
    pub schedule_value: String,
    /// Default: `UTC`.
    pub timezone: Option<String>,
    /// Default: `isolated`.
    pub context_mode: Option<String>,
}

/// A status change asked for by a user or an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusAction {
    /// active → paused.
    Pause,
    /// paused → active; cron and interval tasks count their next run from
    /// now, a `once` task keeps its time.
    Resume,
    /// anything but cancelled → cancelled.
    Cancel,
}

/// The database form of an instant.
fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| Error::Invalid(format!("stored time {s:?}: {e}")))
}

/// An IANA timezone by name.
pub fn parse_timezone(tz: &str) -> Result<Tz> {
    tz.trim().parse::<Tz>().map_err(|_| {
        Error::Invalid(format!(
            "unknown timezone {tz:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\""
        ))
    })
}

fn parse_cron(expr: &str) -> Result<croner::Cron> {
    let expr = expr.trim();
    let fields = expr.split_whitespace().count();
    if !expr.starts_with('@') && fields != 5 {
        return Err(Error::Invalid(format!(
            "cron expression {expr:?} has {fields} fields; use 5: minute hour day-of-month month day-of-week"
        )));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| Error::Invalid(format!("cron expression {expr:?}: {e}")))
}

fn parse_interval(value: &str) -> Result<i64> {
    let v = value.trim();
    let ms = if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        v.parse::<i64>().ok()
    } else {
        None
    };
    match ms {
        Some(ms) if ms >= MIN_INTERVAL_MS => Ok(ms),
        _ => Err(Error::Invalid(format!(
            "interval {v:?}: use a whole number of milliseconds, at least {MIN_INTERVAL_MS}"
        ))),
    }
}

/// The instant of a `once` schedule: RFC 3339 with an offset, or a local
/// `YYYY-MM-DDTHH:MM[:SS]` in `tz` (the earlier instant when the clock goes
/// back; refused when the clock skips it).
fn parse_once(value: &str, tz: Tz) -> Result<DateTime<Utc>> {
    let v = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&Utc));
    }
    let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(v, f).ok())
        .ok_or_else(|| {
            Error::Invalid(format!(
                "once time {v:?}: use RFC 3339 (2025-06-01T09:00:00+02:00) or a local time YYYY-MM-DDTHH:MM[:SS] in the task's timezone"
            ))
        })?;
    match tz.from_local_datetime(&naive) {
        LocalResult::Single(t) => Ok(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(earlier, _) => Ok(earlier.with_timezone(&Utc)),
        LocalResult::None => Err(Error::Invalid(format!(
            "once time {v:?} does not exist in {tz}: the clock skips it (daylight saving time)"
        ))),
    }
}

/// The first run of a schedule after `after` (for `once`: its time, past or
/// not). Validates the schedule and the timezone.
pub fn next_run(
    schedule_type: &str,
    schedule_value: &str,
    tz: &str,
    after: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    let zone = parse_timezone(tz)?;
    match schedule_type {
        "cron" => {
            let cron = parse_cron(schedule_value)?;
            let next = cron
                .find_next_occurrence(&after.with_timezone(&zone), false)
                .map_err(|e| {
                    Error::Invalid(format!(
                        "cron expression {:?} has no run after {}: {e}",
                        schedule_value.trim(),
                        ts(after)
                    ))
                })?;
            Ok(Some(next.with_timezone(&Utc)))
        }
        "interval" => {
            let ms = parse_interval(schedule_value)?;
            let next = TimeDelta::try_milliseconds(ms)
                .and_then(|d| after.checked_add_signed(d))
                .ok_or_else(|| {
                    Error::Invalid(format!("interval {:?} is too long", schedule_value.trim()))
                })?;
            Ok(Some(next))
        }
        "once" => Ok(Some(parse_once(schedule_value, zone)?)),
        other => Err(Error::Invalid(format!(
            "schedule type {other:?}: use cron, interval or once"
        ))),
    }
}

/// The run after one that fired at `now`: none for `once`.
pub fn following_run(
    schedule_type: &str,
    schedule_value: &str,
    tz: &str,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>> {
    match schedule_type {
        "once" => Ok(None),
        _ => next_run(schedule_type, schedule_value, tz, now),
    }
}

/// `s` cut to at most `max` characters, at a character boundary.
fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn check_prompt(prompt: &str) -> Result<()> {
    if prompt.trim().is_empty() {
        return Err(Error::Invalid("task prompt must not be empty".into()));
    }
    if prompt.len() > MAX_PROMPT {
        return Err(Error::Invalid(format!(
            "task prompt is {} bytes; at most 16 KiB",
            prompt.len()
        )));
    }
    Ok(())
}

/// Validates a new task, computes its first run from `now` (a `once` time in
/// the past is due at once) and stores it, active.
pub fn create(tx: &Db<'_>, new: NewTask, now: DateTime<Utc>) -> Result<Task> {
    let group_folder = GroupFolder::new(new.group_folder)?;
    let chat_jid = new.chat_jid.trim();
    if chat_jid.is_empty() || chat_jid.len() > MAX_JID {
        return Err(Error::Invalid(format!(
            "chat jid {:?} is empty or too long",
            new.chat_jid
        )));
    }
    check_prompt(&new.prompt)?;
    let schedule_type = new.schedule_type.trim();
    let schedule_value = new.schedule_value.trim();
    if schedule_value.is_empty() || schedule_value.len() > MAX_SCHEDULE_VALUE {
        return Err(Error::Invalid(format!(
            "schedule value {schedule_value:?}: use 1-{MAX_SCHEDULE_VALUE} characters"
        )));
    }
    let timezone = match new.timezone.as_deref().map(str::trim) {
        None | Some("") => "UTC".to_string(),
        Some(tz) => parse_timezone(tz)?.name().to_string(),
    };
    let context_mode = match new.context_mode.as_deref().map(str::trim) {
        None | Some("") => "isolated",
        Some(m @ ("group" | "isolated")) => m,
        Some(other) => {
            return Err(Error::Invalid(format!(
                "context mode {other:?}: use group or isolated"
            )));
        }
    };
    let next = next_run(schedule_type, schedule_value, &timezone, now)?;
    let id = format!("task-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let task = Task {
        id,
        group_folder,
        chat_jid: chat_jid.to_string(),
        prompt: new.prompt,
        schedule_type: schedule_type.to_string(),
        schedule_value: schedule_value.to_string(),
        timezone,
        context_mode: context_mode.to_string(),
        next_run: next.map(ts),
        last_run: None,
        last_result: None,
        status: "active".into(),
        created_at: ts(now),
    };
    store::tasks::insert(tx, &task)?;
    Ok(task)
}

/// The task, if it exists and (when `allowed_group` is given) belongs to
/// that group; `NotFound` otherwise, the same for both cases.
fn get_visible(conn: &Db<'_>, id: &str, allowed_group: Option<&str>) -> Result<Task> {
    store::tasks::get(conn, id)?
        .filter(|t| allowed_group.is_none_or(|g| t.group_folder == g))
        .ok_or_else(|| Error::NotFound(format!("task {id:?}")))
}

/// Pauses, resumes or cancels a task. With `allowed_group`, only a task of
/// that group is found. Returns the task as it is now.
pub fn set_status(
    tx: &Db<'_>,
    id: &str,
    allowed_group: Option<&str>,
    action: StatusAction,
    now: DateTime<Utc>,
) -> Result<Task> {
    let task = get_visible(tx, id, allowed_group)?;
    let status = task.status.as_str();
    match (action, status) {
        (StatusAction::Pause, "active") => {
            store::tasks::set_status(tx, id, "paused")?;
        }
        (StatusAction::Pause, "paused") => {
            return Err(Error::Conflict(format!("task {id} is paused already")));
        }
        (StatusAction::Pause, s) => {
            return Err(Error::Conflict(format!(
                "task {id} is {s}; only an active task can be paused"
            )));
        }
        (StatusAction::Resume, "paused") => {
            let next = if task.schedule_type == "once" {
                task.next_run.clone()
            } else {
                next_run(
                    &task.schedule_type,
                    &task.schedule_value,
                    &task.timezone,
                    now,
                )?
                .map(ts)
            };
            store::tasks::reactivate(tx, id, next.as_deref())?;
        }
        (StatusAction::Resume, "active") => {
            return Err(Error::Conflict(format!(
                "task {id} is active already; only a paused task can be resumed"
            )));
        }
        (StatusAction::Resume, s) => {
            return Err(Error::Conflict(format!(
                "task {id} is {s}; only a paused task can be resumed"
            )));
        }
        (StatusAction::Cancel, "cancelled") => {
            return Err(Error::Conflict(format!("task {id} is cancelled already")));
        }
        (StatusAction::Cancel, _) => {
            store::tasks::set_status(tx, id, "cancelled")?;
        }
    }
    get_visible(tx, id, allowed_group)
}

/// Claims up to `limit` active, unclaimed tasks of groups that are `mine`
/// due at `now` for `claimer`,
/// earliest first, and advances each one's `next_run` to the run after
/// `now` (NULL for `once`). The returned tasks carry the values of the run:
/// `next_run` is the slot being run. A task whose following run cannot be
/// computed any more (its schedule no longer parses) is paused, not run.
pub fn claim_due(
    tx: &Db<'_>,
    now: DateTime<Utc>,
    claimer: &str,
    limit: usize,
    mine: &dyn Fn(&GroupFolder) -> bool,
) -> Result<Vec<Task>> {
    if claimer.trim().is_empty() {
        return Err(Error::Invalid("claimer must not be empty".into()));
    }
    let now_s = ts(now);
    let due = store::tasks::due(tx, &now_s, limit)?;
    let mut claimed = Vec::with_capacity(due.len());
    // Another host's group's tasks are its scheduler's.
    for task in due.into_iter().filter(|t| mine(&t.group_folder)) {
        let following = match following_run(
            &task.schedule_type,
            &task.schedule_value,
            &task.timezone,
            now,
        ) {
            Ok(next) => next.map(ts),
            Err(e) => {
                tracing::warn!(task = %task.id, "pausing task: cannot compute its next run: {e}");
                store::tasks::pause_unclaimed(tx, &task.id)?;
                continue;
            }
        };
        if store::tasks::claim(tx, &task.id, claimer, &now_s, following.as_deref())? {
            claimed.push(task);
        }
    }
    Ok(claimed)
}

/// Records the end of a run: a run log row, `last_run` and `last_result`
/// (the result, or `Error: …`, cut to 2,000 characters); clears the claim;
/// a `once` task is completed (unless it was cancelled meanwhile, which
/// sticks). Returns the task as it is now.
pub fn finish(
    tx: &Db<'_>,
    id: &str,
    run_at: DateTime<Utc>,
    duration_ms: u64,
    outcome: std::result::Result<&str, &str>,
) -> Result<Task> {
    if store::tasks::get(tx, id)?.is_none() {
        return Err(Error::NotFound(format!("task {id:?}")));
    }
    let (status, result, error, last) = match outcome {
        Ok(r) => (
            "success",
            Some(truncate_chars(r, MAX_LOG_CHARS)),
            None,
            truncate_chars(r, MAX_LAST_RESULT_CHARS).to_string(),
        ),
        Err(e) => (
            "error",
            None,
            Some(truncate_chars(e, MAX_LOG_CHARS)),
            truncate_chars(&format!("Error: {e}"), MAX_LAST_RESULT_CHARS).to_string(),
        ),
    };
    let run_at = ts(run_at);
    let duration_ms = i64::try_from(duration_ms).unwrap_or(i64::MAX);
    store::tasks::log_run(tx, id, &run_at, duration_ms, status, result, error)?;
    store::tasks::end_run(tx, id, &run_at, &last)?;
    get_visible(tx, id, None)
}

/// Clears the claims of claimers whose name starts with `claimer_prefix`
/// (every claim with `None`); for the host's start after a crash. An
/// interrupted run is due again: an active or paused `once` task gets its
/// time back, a cron or interval task its claim time (unless its next run
/// is earlier). Returns how many claims were cleared.
pub fn release_claims(tx: &Db<'_>, claimer_prefix: Option<&str>) -> Result<usize> {
    release_claims_where(tx, claimer_prefix, &|_| true)
}

/// [`release_claims`] of the claims `pick` picks.
pub fn release_claims_where(
    tx: &Db<'_>,
    claimer_prefix: Option<&str>,
    pick: &dyn Fn(&store::tasks::Claimed) -> bool,
) -> Result<usize> {
    let claimed: Vec<_> = store::tasks::claimed(tx, claimer_prefix)?
        .into_iter()
        .filter(|c| pick(c))
        .collect();
    for store::tasks::Claimed {
        task, claimed_at, ..
    } in &claimed
    {
        let next = if matches!(task.status.as_str(), "active" | "paused") {
            if task.schedule_type == "once" {
                match parse_timezone(&task.timezone)
                    .and_then(|tz| parse_once(&task.schedule_value, tz))
                {
                    Ok(t) => Some(ts(t)),
                    Err(e) => {
                        tracing::warn!(task = %task.id, "cannot restore the time of a once task: {e}");
                        task.next_run.clone()
                    }
                }
            } else {
                // The strings order as the instants they name.
                match (&task.next_run, claimed_at) {
                    (Some(n), Some(c)) => Some(n.min(c).clone()),
                    (n, c) => n.clone().or_else(|| c.clone()),
                }
            }
        } else {
            task.next_run.clone()
        };
        store::tasks::release(tx, &task.id, next.as_deref())?;
    }
    Ok(claimed.len())
}

/// The earliest `next_run` among active, unclaimed tasks: when the
/// scheduler should wake next.
pub fn next_due(conn: &Db<'_>) -> Result<Option<DateTime<Utc>>> {
    store::tasks::earliest_next_run(conn)?
        .as_deref()
        .map(parse_ts)
        .transpose()
}

/// The tasks `scope` may see (every group's when `None`), as the API, the
/// viewer and the agents' `list_tasks` show them.
pub async fn list(store: &Store, scope: Option<GroupFolder>) -> Result<Vec<Task>> {
    store
        .read(move |c| store::tasks::list(c, scope.as_deref()))
        .await
}

/// Most runs [`detail`] returns, newest first.
pub const DETAIL_RUNS: usize = 50;

/// One task, any group's, with its last [`DETAIL_RUNS`] runs; `NotFound`
/// for an unknown id.
pub async fn detail(store: &Store, id: &str) -> Result<(Task, Vec<TaskRun>)> {
    let id = id.to_string();
    store
        .read(move |c| {
            Ok((
                store::tasks::get(c, &id)?
                    .ok_or_else(|| Error::NotFound(format!("task {id:?}")))?,
                store::tasks::runs(c, &id, DETAIL_RUNS)?,
            ))
        })
        .await
}

#[cfg(test)]
mod tests;
