//! The IPC folder both sides share (`data/ipc/{group}` on the host,
//! `/workspace/ipc` in the container): file names and atomic writes.
//!
//! ```text
//! input/{name}.json    host → agent: an [`InputMessage`](crate::wire::InputMessage)
//! input/_close         host → agent: finish after the current work
//! events/{name}.json   agent → host: an [`AgentEvent`](crate::wire::AgentEvent)
//! tasks/{id}.json      agent → host: a [`TaskRequest`](crate::wire::TaskRequest)
//! responses/{id}.json  host → agent: the [`TaskResponse`](crate::wire::TaskResponse)
//! errors/              files that could not be read, kept for a person
//! model.sock           the group's model gateway
//! ```
//!
//! Every file is written to a dot-named temp file first and renamed into
//! place, so a reader never sees half a file and skips names starting
//! with `.`.

use std::io::Write;
use std::path::{Path, PathBuf};

pub const INPUT_DIR: &str = "input";
pub const EVENTS_DIR: &str = "events";
pub const ERRORS_DIR: &str = "errors";
pub const TASKS_DIR: &str = "tasks";
pub const RESPONSES_DIR: &str = "responses";
pub const CLOSE: &str = "_close";
pub const MODEL_SOCKET: &str = "model.sock";

/// Writes `bytes` to `dir/name` through `dir/.name.tmp` and a rename.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
    }
    let path = dir.join(name);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// A file name that sorts by creation time: `{millis}-{random}.json`.
pub fn timestamped_name() -> String {
    format!(
        "{:013}-{}.json",
        chrono::Utc::now().timestamp_millis(),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_and_sortable_names() {
        let d = tempfile::tempdir().unwrap();
        let p = write_atomic(&d.path().join("input"), "a.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        assert_eq!(std::fs::read_dir(d.path().join("input")).unwrap().count(), 1, "no temp file left");
        let (a, b) = (timestamped_name(), timestamped_name());
        assert!(a.ends_with(".json") && a.len() == b.len());
    }
}
