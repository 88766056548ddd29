//! Host → agent messages: files in `ipc/input/`. The host writes each
//! message as `{"type":"message","text":…}` through a temp file and a rename,
//! and `_close` (empty) to ask the agent to finish. inotify wakes the
//! watcher at once; each wake rescans the folder, so nothing is missed when
//! events coalesce, and files are taken in name order (the host names them
//! by time).
//!
//! The folder is watched by what it is (its inode), not by its name: when
//! it is replaced (the agent moved it and put a link or another folder in
//! its place, which the host then makes a real folder again) the host
//! writes into a folder this watch does not see. So the folder's parent is
//! watched too, and its identity checked at every wake and every
//! [`CHECK_EVERY`]: once it changed, [`Item::Replaced`] tells the runner to
//! finish, and the host's next message starts a fresh container.

use std::path::Path;

use tokio::sync::mpsc;

use g2_core::ipc::{self, CLOSE};
use g2_core::watch::{Wake, Watch};
use g2_core::wire::InputMessage;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Message(String),
    Close,
    /// The folder was replaced: what the host writes now goes elsewhere.
    Replaced,
}

/// How often the folder's identity is checked without a wake.
pub const CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Device and inode of what is at `dir` (not following a link), if it is a
/// folder.
fn identity(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| (m.dev(), m.ino()))
}

/// What a wake does: drains the folder while it is the one watched, says
/// [`Item::Replaced`] once when it is not.
struct Inbox {
    dir: std::path::PathBuf,
    errors: std::path::PathBuf,
    was: Option<(u64, u64)>,
    replaced: bool,
    tx: mpsc::UnboundedSender<Item>,
}

impl Inbox {
    fn wake(&mut self) {
        if self.replaced {
            return;
        }
        if identity(&self.dir) != self.was {
            self.replaced = true;
            eprintln!(
                "g2-agent: {} was replaced; finishing (the host starts a fresh agent)",
                self.dir.display()
            );
            let _ = self.tx.send(Item::Replaced);
            return;
        }
        drain(&self.dir, &self.errors, &self.tx);
    }
}

/// Watches `dir`; the receiver yields items in order. The watcher lives as
/// long as the returned guard.
pub fn watch(dir: &Path, errors: &Path) -> anyhow::Result<(mpsc::UnboundedReceiver<Item>, Watch)> {
    std::fs::create_dir_all(dir)?;
    let (tx, rx) = mpsc::unbounded_channel();
    // One wake at a time: two drains at once would each take a file and
    // could send the later one first.
    let inbox = std::sync::Arc::new(std::sync::Mutex::new(Inbox {
        dir: dir.to_path_buf(),
        errors: errors.to_path_buf(),
        was: identity(dir),
        replaced: false,
        tx: tx.clone(),
    }));
    let wake = {
        let inbox = inbox.clone();
        move || {
            inbox
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .wake();
        }
    };
    // Every wake (paths or rescan, in the folder or beside it) looks again.
    let on_wake = wake.clone();
    let mut watcher = Watch::new(move |_: Wake| on_wake())?;
    watcher.add(dir)?;
    if let Some(parent) = dir.parent() {
        watcher.add(parent)?;
    }
    // A replacement the watch did not see is found within CHECK_EVERY;
    // the check ends with the receiver.
    let (check, closed) = (wake.clone(), tx);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(CHECK_EVERY);
        while !closed.is_closed() {
            every.tick().await;
            check();
        }
    });
    // Files that were there before the watch began.
    wake();
    Ok((rx, watcher))
}

/// Takes every complete file out of the folder, in name order.
fn drain(dir: &Path, errors: &Path, tx: &mpsc::UnboundedSender<Item>) {
    // Messages first, then the close sentinel: a close never overtakes them.
    for name in ipc::pending(dir) {
        let path = dir.join(&name);
        // Whoever removes the file owns it: two wakes never deliver it twice.
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if std::fs::remove_file(&path).is_err() {
            continue;
        }
        match serde_json::from_slice::<InputMessage>(&bytes) {
            Ok(InputMessage::Message { text }) => {
                let _ = tx.send(Item::Message(text));
            }
            Err(e) => keep_bad(errors, &name, &bytes, &e.to_string()),
        }
    }
    if dir.join(CLOSE).is_file() && std::fs::remove_file(dir.join(CLOSE)).is_ok() {
        let _ = tx.send(Item::Close);
    }
}

fn keep_bad(errors: &Path, name: &str, bytes: &[u8], why: &str) {
    eprintln!("g2-agent: input file {name} skipped: {why}");
    let _ = crate::paths::write_atomic(errors, name, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn next(rx: &mut mpsc::UnboundedReceiver<Item>) -> Item {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn delivers_in_order_skips_bad_and_closes() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        let errors = dir.path().join("errors");
        std::fs::create_dir_all(&input).unwrap();
        std::fs::write(
            input.join("001.json"),
            r#"{"type":"message","text":"before start"}"#,
        )
        .unwrap();
        let (mut rx, _w) = watch(&input, &errors).unwrap();
        assert_eq!(next(&mut rx).await, Item::Message("before start".into()));
        crate::paths::write_atomic(&input, "002.json", br#"{"type":"message","text":"two"}"#)
            .unwrap();
        assert_eq!(next(&mut rx).await, Item::Message("two".into()));
        std::fs::write(input.join("003.json"), b"{broken").unwrap();
        crate::paths::write_atomic(&input, "004.json", br#"{"type":"message","text":"four"}"#)
            .unwrap();
        assert_eq!(next(&mut rx).await, Item::Message("four".into()));
        assert!(errors.join("003.json").exists());
        std::fs::write(input.join(CLOSE), b"").unwrap();
        assert_eq!(next(&mut rx).await, Item::Close);
        assert!(
            std::fs::read_dir(&input).unwrap().next().is_none(),
            "input folder left empty"
        );
    }

    #[tokio::test]
    async fn a_replaced_folder_is_noticed_once() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        let errors = dir.path().join("errors");
        std::fs::create_dir_all(&input).unwrap();
        let (mut rx, _w) = watch(&input, &errors).unwrap();
        // The agent moves it and links something in its place; the host
        // then makes a real folder again and writes into it.
        std::fs::rename(&input, dir.path().join("input.old")).unwrap();
        std::os::unix::fs::symlink("/tmp", &input).unwrap();
        assert_eq!(next(&mut rx).await, Item::Replaced);
        std::fs::remove_file(&input).unwrap();
        std::fs::create_dir(&input).unwrap();
        crate::paths::write_atomic(&input, "001.json", br#"{"type":"message","text":"lost?"}"#)
            .unwrap();
        // Said once; the new folder's message is left for the next agent.
        let more = tokio::time::timeout(CHECK_EVERY * 2, rx.recv()).await;
        assert!(more.is_err(), "{more:?}");
        assert!(input.join("001.json").exists());
    }
}
