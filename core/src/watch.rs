//! Folder watching for both sides of the IPC folder: inotify (through
//! `notify`'s recommended watcher) with one rule written once — **access
//! events are dropped**. Whoever is woken reads the folder, and every read
//! is itself an access event: forwarding those would wake the reader
//! forever.
//!
//! Everything else arrives as a [`Wake`]: the paths an event names, or
//! [`Wake::Rescan`] when the kernel's queue overflowed (events were lost)
//! or the watcher reported an error — in both cases the caller can no
//! longer trust the events it saw and must look at everything it watches.
//! Events coalesce and carry no promise about what changed, so callers
//! treat a wake as "look again", never as the change itself.
//!
//! ```no_run
//! # fn demo(dir: &std::path::Path) -> Result<(), g2_core::watch::Error> {
//! use g2_core::watch::{Wake, Watch};
//! let (tx, rx) = std::sync::mpsc::channel();
//! let mut watch = Watch::new(move |wake: Wake| {
//!     let _ = tx.send(wake); // Paths(..) or Rescan; never an access
//! })?;
//! watch.add(dir)?; // non-recursive; add as many folders as needed
//! # drop(rx); Ok(()) }
//! ```
//!
//! The callback runs on the watcher's own thread: it should hand the wake
//! on (a channel) or do short, blocking work. Events stop when the
//! [`Watch`] is dropped.

use std::path::{Path, PathBuf};

use notify::{EventKind, RecursiveMode, Watcher};

/// What a watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Something other than an access happened to these paths (the folder
    /// itself or entries in it).
    Paths(Vec<PathBuf>),
    /// Events may have been lost: look at everything watched.
    Rescan,
}

/// Why a watch could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting a file watcher: {0}")]
    Start(#[source] notify::Error),
    #[error("watching {}: {source}", path.display())]
    Watch {
        path: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// An inotify watch over any number of folders (non-recursive), calling
/// back with every [`Wake`].
pub struct Watch {
    inner: notify::RecommendedWatcher,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

impl Watch {
    /// A watcher with no folder yet; [`Watch::add`] folders to it.
    pub fn new(mut on_wake: impl FnMut(Wake) + Send + 'static) -> Result<Watch, Error> {
        let inner = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Some(wake) = wake_of(res) {
                on_wake(wake);
            }
        })
        .map_err(Error::Start)?;
        Ok(Watch { inner })
    }

    /// A watcher over one folder.
    pub fn on(dir: &Path, on_wake: impl FnMut(Wake) + Send + 'static) -> Result<Watch, Error> {
        let mut w = Watch::new(on_wake)?;
        w.add(dir)?;
        Ok(w)
    }

    /// Watches `dir` too (its entries, not its subfolders). The folder must
    /// exist; watching a folder twice is harmless.
    pub fn add(&mut self, dir: &Path) -> Result<(), Error> {
        self.inner
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| Error::Watch {
                path: dir.to_path_buf(),
                source,
            })
    }
}

/// The rule: accesses are dropped, lost events and errors mean rescan.
fn wake_of(res: notify::Result<notify::Event>) -> Option<Wake> {
    match res {
        Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => None,
        Ok(ev) if ev.need_rescan() => Some(Wake::Rescan),
        Ok(ev) => Some(Wake::Paths(ev.paths)),
        Err(_) => Some(Wake::Rescan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, Flag};
    use std::time::Duration;

    #[test]
    fn accesses_are_dropped_and_lost_events_rescan() {
        let at = |kind| notify::Event::new(kind).add_path("/x/a.json".into());
        assert_eq!(wake_of(Ok(at(EventKind::Access(AccessKind::Any)))), None);
        assert_eq!(
            wake_of(Ok(at(EventKind::Create(CreateKind::File)))),
            Some(Wake::Paths(vec!["/x/a.json".into()]))
        );
        assert_eq!(
            wake_of(Ok(
                notify::Event::new(EventKind::Other).set_flag(Flag::Rescan)
            )),
            Some(Wake::Rescan)
        );
        assert_eq!(
            wake_of(Err(notify::Error::generic("queue gone"))),
            Some(Wake::Rescan)
        );
    }

    #[test]
    fn reading_a_watched_folder_does_not_wake_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("old.json"), b"{}").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let _w = Watch::on(d.path(), move |w| {
            let _ = tx.send(w);
        })
        .unwrap();
        // Our own reads come first; the kernel keeps event order, so the
        // first wake must be the new file's.
        for _ in 0..3 {
            std::fs::read(d.path().join("old.json")).unwrap();
            std::fs::read_dir(d.path()).unwrap().for_each(drop);
        }
        std::fs::write(d.path().join("new.json"), b"{}").unwrap();
        let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first, Wake::Paths(vec![d.path().join("new.json")]));
    }

    #[test]
    fn a_missing_folder_is_a_typed_error() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("missing");
        let e = Watch::on(&missing, |_| {}).unwrap_err();
        assert!(matches!(&e, Error::Watch { path, .. } if path == &missing));
        assert!(e.to_string().contains("missing"), "{e}");
    }
}
