//! `hook_events`: the hook records agents report through `events/`
//! (SessionStart, UserPromptSubmit, PostToolUse, PreCompact, Stop,
//! SessionEnd), kept for the memory layer.

use rusqlite::{Transaction, params};

use crate::Result;

/// Records one hook event of a group's agent; `data` is the event's JSON.
pub fn insert_hook(
    tx: &Transaction<'_>,
    group_folder: &str,
    session_id: Option<&str>,
    event: &str,
    data: &str,
    at: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO hook_events (group_folder, session_id, event, data, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![group_folder, session_id, event, data, at],
    )?;
    Ok(())
}
