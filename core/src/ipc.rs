//! The IPC folder both sides share (`data/ipc/{group}` on the host,
//! `/workspace/ipc` in the container): file names and atomic writes.
//!
//! ```text
//! input/{name}.json    host → agent: an [`InputMessage`](crate::wire::InputMessage)
//! input/_close         host → agent: finish after the current work
//! events/{name}.json   agent → host: an [`AgentEvent`](crate::wire::AgentEvent)
//! tasks/{id}.json      agent → host: a [`TaskRequest`](crate::wire::TaskRequest)
//! messages/{id}.json   agent → host: a `send_message` [`TaskRequest`](crate::wire::TaskRequest)
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
pub const MESSAGES_DIR: &str = "messages";
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

/// The finished `*.json` files of an IPC folder, in name order (names
/// sort by time); dot-named temp files are skipped. A missing folder has
/// none.
pub fn pending(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
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
        write_atomic(&d.path().join("input"), "0.json", b"{}").unwrap();
        std::fs::write(d.path().join("input/.b.json.tmp"), b"").unwrap();
        std::fs::write(d.path().join("input/_close"), b"").unwrap();
        assert_eq!(pending(&d.path().join("input")), ["0.json", "a.json"]);
        assert!(pending(&d.path().join("missing")).is_empty());
        let (a, b) = (timestamped_name(), timestamped_name());
        assert!(a.ends_with(".json") && a.len() == b.len());
    }
}
