//! A turn's stamps in the container, taken only while the host traces
//! turns ([`wire::ENV_AGENT_TRACE`] set; `g2_core::trace`): the runner's
//! own, and the hooks'. A hook is a process of its own, started by Claude
//! Code, so it appends one line to a file under the IPC folder (named to
//! it in [`wire::ENV_HOOK_STAMPS`]); the runner reads it at the turn's
//! `result` and sends every stamp in the reply frame. With tracing off
//! nothing here runs: no variable is set, no file is made.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use g2_core::trace::{self, Stage, Stamp, Trace};
use g2_core::wire;

use crate::paths::Paths;

/// The runner's stamps of the turn under way.
pub struct Turn {
    stamps: Vec<Stamp>,
    hooks: PathBuf,
}

impl Turn {
    /// Tracing, if the host asked for it; the hooks' file's folder is made.
    pub fn start(paths: &Paths) -> Option<Turn> {
        std::env::var_os(wire::ENV_AGENT_TRACE)?;
        let hooks = paths.ipc().join(trace::HOOK_STAMPS);
        if let Some(dir) = hooks.parent()
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            eprintln!("g2-agent: no hook stamps ({}): {e}", dir.display());
        }
        Some(Turn {
            stamps: Vec::new(),
            hooks,
        })
    }

    /// The file the hooks append to (for their environment).
    pub fn hooks_file(&self) -> &Path {
        &self.hooks
    }

    pub fn stamp(&mut self, stage: Stage) {
        if self.stamps.len() < trace::MAX_STAMPS {
            self.stamps.push(Stamp::new(stage, trace::now_us()));
        }
    }

    /// Everything stamped since the last take, the hooks' lines included
    /// (their file is moved aside first, so a hook appending now starts a
    /// new one for the next turn).
    pub fn take(&mut self) -> Trace {
        let taken = self.hooks.with_extension("taken");
        if std::fs::rename(&self.hooks, &taken).is_ok() {
            if let Ok(text) = std::fs::read_to_string(&taken) {
                self.stamps.extend(trace::parse_hook_lines(&text));
            }
            let _ = std::fs::remove_file(&taken);
        }
        self.stamps.sort_by_key(|s| s.at_us);
        self.stamps.truncate(trace::MAX_STAMPS);
        Trace(std::mem::take(&mut self.stamps))
    }
}

/// The memory request's stamps of this hook process (asked, answered).
static MEMORY: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// A hook process being traced.
pub struct Hook {
    file: PathBuf,
    start_us: u64,
}

impl Hook {
    /// Started now, if the runner traces (else None, and nothing is paid).
    pub fn start() -> Option<Hook> {
        let file = std::env::var_os(wire::ENV_HOOK_STAMPS).filter(|f| !f.is_empty())?;
        Some(Hook::at(PathBuf::from(file)))
    }

    fn at(file: PathBuf) -> Hook {
        Hook {
            file,
            start_us: trace::now_us(),
        }
    }

    /// Appends the hook's line (one short write: lines of hooks that end
    /// at once never mix).
    pub fn done(self, event: &str) {
        let memory = *MEMORY
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let line = trace::hook_line(event, self.start_us, trace::now_us(), memory);
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.file)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("g2-agent hook {event}: stamps not written: {e}");
        }
    }
}

/// Whether this hook process traces (its memory request is then stamped).
pub fn hook_traced() -> bool {
    std::env::var_os(wire::ENV_HOOK_STAMPS).is_some_and(|f| !f.is_empty())
}

/// Records the memory request's stamps for [`Hook::done`].
pub fn memory(asked_us: u64, answered_us: u64) {
    *MEMORY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((asked_us, answered_us));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_lines_reach_the_turns_trace_once() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            workspace: dir.path().into(),
            claude: "claude".into(),
        };
        std::fs::create_dir_all(paths.ipc().join("trace")).unwrap();
        let mut turn = Turn {
            stamps: Vec::new(),
            hooks: paths.ipc().join(trace::HOOK_STAMPS),
        };
        turn.stamp(Stage::RunnerRead);
        Hook::at(turn.hooks_file().to_path_buf()).done(wire::POST_TOOL_USE);
        turn.stamp(Stage::Result);
        let got: Vec<_> = turn.take().0.into_iter().map(|s| s.stage).collect();
        assert_eq!(got, ["runner_read", "hook_start", "hook_end", "result"]);
        assert!(turn.take().0.is_empty(), "taken once");
        assert!(!turn.hooks_file().exists());
    }

    #[test]
    fn a_hook_without_tracing_pays_nothing() {
        // The runner sets the variable only while tracing; the suite never does.
        assert!(std::env::var_os(wire::ENV_HOOK_STAMPS).is_none());
        assert!(Hook::start().is_none());
        assert!(!hook_traced());
    }
}
