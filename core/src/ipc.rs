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
//! session_history.json host → agent: snapshot of the group's session history
//! current_tasks.json   host → agent: snapshot of the tasks it may see
//! available_groups.json host → agent: snapshot of the groups (main only; else empty)
//! ```
//!
//! The host rewrites the snapshots before each container start
//! (`available_groups.json` also on `refresh_groups`); the agent only reads
//! them. `docs/protocol.md`, "IPC folder".
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
pub const SESSION_HISTORY: &str = "session_history.json";
pub const CURRENT_TASKS: &str = "current_tasks.json";
pub const AVAILABLE_GROUPS: &str = "available_groups.json";

/// Writes an agent's request into the IPC folder `ipc` as the `g2` MCP
/// tools do: `messages/` for `send_message`, `tasks/` for everything else.
/// Returns where the host will put its answer.
pub fn write_request(ipc: &Path, request: &crate::wire::TaskRequest) -> std::io::Result<PathBuf> {
    let dir = match request.action {
        crate::wire::Action::SendMessage { .. } => MESSAGES_DIR,
        _ => TASKS_DIR,
    };
    let name = format!("{}.json", request.request_id);
    let body = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    write_atomic(&ipc.join(dir), &name, &body)?;
    Ok(ipc.join(RESPONSES_DIR).join(name))
}

/// Writes `bytes` to `dir/name` through a fresh dot-named temp file and a
/// rename. The folders are writable by the agent too, so nothing here
/// follows a link it may have planted: the temp file has a random name and
/// is created exclusively (`O_EXCL` never follows a symlink), and the
/// rename replaces a link at `name` rather than writing through it.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{name}.{}.tmp",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let path = dir.join(name);
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// A process-wide counter, so names made in the same millisecond still
/// sort in the order they were made.
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The finished `*.json` files of an IPC folder, in name order (names
/// sort by time); dot-named temp files are skipped. A missing folder has
/// none.
pub fn pending(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json") && !n.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// A file name that sorts by creation time (and, within one process, by
/// order of creation): `{millis}-{seq}-{random}.json`.
pub fn timestamped_name() -> String {
    format!(
        "{:013}-{:08}-{}.json",
        chrono::Utc::now().timestamp_millis(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 100_000_000,
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
        assert_eq!(
            std::fs::read_dir(d.path().join("input")).unwrap().count(),
            1,
            "no temp file left"
        );
        write_atomic(&d.path().join("input"), "0.json", b"{}").unwrap();
        std::fs::write(d.path().join("input/.b.json.tmp"), b"").unwrap();
        std::fs::write(d.path().join("input/_close"), b"").unwrap();
        assert_eq!(pending(&d.path().join("input")), ["0.json", "a.json"]);
        assert!(pending(&d.path().join("missing")).is_empty());
        let names: Vec<String> = (0..1000).map(|_| timestamped_name()).collect();
        assert!(names[0].ends_with(".json") && names.iter().all(|n| n.len() == names[0].len()));
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "made in order, sorted in order"
        );
    }

    #[test]
    fn planted_links_are_neither_followed_nor_written_through() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("secret");
        std::fs::write(&secret, b"host only").unwrap();
        let dir = d.path().join("responses");
        std::fs::create_dir_all(&dir).unwrap();
        // A link where the answer goes: replaced, the target untouched.
        symlink(&secret, dir.join("x.json")).unwrap();
        write_atomic(&dir, "x.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&secret).unwrap(), b"host only");
        assert!(
            !std::fs::symlink_metadata(dir.join("x.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // A link where a request is read: refused (the host reads through
        // a confined handle).
        symlink(&secret, dir.join("y.json")).unwrap();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let confined = crate::confined::Dir::open(&dir).unwrap();
        assert!(confined.read("y.json", 1 << 20).is_err());
        assert!(
            confined.read("sub", 1 << 20).is_err(),
            "a folder is not a file"
        );
        assert_eq!(confined.read("x.json", 1 << 20).unwrap(), b"{}");
        std::fs::write(dir.join("big.json"), vec![b' '; 100]).unwrap();
        assert!(confined.read("big.json", 99).is_err());
    }
}
