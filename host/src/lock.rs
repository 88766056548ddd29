//! One host per home (per runtime folder, when several hosts share one
//! home folder: `cluster.runtime_dir`, docs/cluster.md).
//!
//! The processes that run agents or serve the groups' sockets (`g2 serve`,
//! `g2 run`, `g2 gateway`) take an exclusive `flock(2)` on `data/host.lock`
//! for as long as they live, and write who they are into it. A second such
//! process on the same home is refused with a clear error naming the
//! holder, before it touches a container or a socket; so a host never reaps
//! another live host's containers. The kernel drops the lock when its
//! holder dies, however it dies: a killed host leaves no stale lock, and the
//! next host reaps what it left.

use std::fs::File;
use std::io::{Read, Seek, Write};

use serde::{Deserialize, Serialize};

use crate::home::Home;
use crate::{Error, Result};

/// Who holds a home (the lock file's contents).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    /// `serve`, `run` or `gateway`.
    pub command: String,
    /// The HTTP API of a `g2 serve`, once it listens.
    pub api: Option<String>,
}

/// The held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct HostLock {
    file: File,
    holder: Holder,
}

impl HostLock {
    /// Takes the home for `command`, or says who has it.
    pub fn acquire(home: &Home, command: &str) -> Result<HostLock> {
        let path = home.lock_path();
        let dir = home.runtime_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let who = serde_json::from_str::<Holder>(&text)
                    .map(|h| match h.api {
                        Some(api) => format!("g2 {} (pid {}, {api})", h.command, h.pid),
                        None => format!("g2 {} (pid {})", h.command, h.pid),
                    })
                    .unwrap_or_else(|_| "another g2 process".into());
                return Err(Error::Conflict(format!(
                    "{who} is running on this home ({}); one host per home — stop it first, or talk to it",
                    home.root().display()
                )));
            }
            Err(e) => return Err(Error::io(format!("locking {}", path.display()), e.into())),
        }
        let mut lock = HostLock {
            file,
            holder: Holder {
                pid: std::process::id(),
                command: command.into(),
                api: None,
            },
        };
        lock.write()?;
        Ok(lock)
    }

    /// Records the API address of the holder (`g2 serve`).
    pub fn set_api(&mut self, api: &str) -> Result<()> {
        self.holder.api = Some(api.to_string());
        self.write()
    }

    fn write(&mut self) -> Result<()> {
        let text = serde_json::to_string(&self.holder).unwrap_or_default();
        let r = self
            .file
            .set_len(0)
            .and_then(|()| self.file.rewind())
            .and_then(|()| self.file.write_all(text.as_bytes()));
        r.map_err(|e| Error::io("writing data/host.lock", e))
    }

    /// Who holds the home now, if anyone (without taking it).
    pub fn holder(home: &Home) -> Option<Holder> {
        let file = File::open(home.lock_path()).ok()?;
        // Free means nobody holds it: release the probe at once.
        if rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared).is_ok() {
            return None;
        }
        serde_json::from_reader(file).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_host_is_refused_and_a_released_home_is_free() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        let mut first = HostLock::acquire(&home, "serve").unwrap();
        first.set_api("http://127.0.0.1:1").unwrap();
        let e = HostLock::acquire(&home, "run").unwrap_err().to_string();
        assert!(
            e.contains("g2 serve (pid")
                && e.contains("http://127.0.0.1:1")
                && e.contains("one host per home"),
            "{e}"
        );
        assert_eq!(
            HostLock::holder(&home).map(|h| h.command),
            Some("serve".into())
        );
        drop(first);
        assert_eq!(HostLock::holder(&home), None);
        let _again = HostLock::acquire(&home, "run").unwrap();
    }
}
