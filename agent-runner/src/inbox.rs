//! Host → agent messages: files in `ipc/input/`. The host writes each
//! message as `{"type":"message","text":…}` through a temp file and a rename,
//! and `_close` (empty) to ask the agent to finish. inotify wakes the
//! watcher at once; each wake rescans the folder, so nothing is missed when
//! events coalesce, and files are taken in name order (the host names them
//! by time).

use std::path::Path;

use tokio::sync::mpsc;

use g2_core::ipc::{self, CLOSE};
use g2_core::watch::{Wake, Watch};
use g2_core::wire::InputMessage;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Message(String),
    Close,
}

/// Watches `dir`; the receiver yields items in order. The watcher lives as
/// long as the returned guard.
pub fn watch(dir: &Path, errors: &Path) -> anyhow::Result<(mpsc::UnboundedReceiver<Item>, Watch)> {
    std::fs::create_dir_all(dir)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let (d, e) = (dir.to_path_buf(), errors.to_path_buf());
    let wake_tx = tx.clone();
    // One drain at a time: two at once would each take a file and could
    // send the later one first.
    let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
    let wake_lock = lock.clone();
    // Every wake (paths or rescan) drains the whole folder.
    let watcher = Watch::on(dir, move |_: Wake| {
        let _one = wake_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drain(&d, &e, &wake_tx);
    })?;
    // Files that were there before the watch began.
    let _one = lock
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    drain(dir, errors, &tx);
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
}
