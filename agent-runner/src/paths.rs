//! Where things are inside the container (the mount table of
//! `docs/protocol.md`, "Mounts"; the paths are `g2_core::wire`'s).
//! `G2_WORKSPACE` moves the whole tree, so the runner can be exercised
//! outside a container too.

use std::path::PathBuf;

use g2_core::ipc;
use g2_core::wire::{self, in_workspace};

#[derive(Debug, Clone)]
pub struct Paths {
    /// `/workspace`.
    pub workspace: PathBuf,
    /// The Claude Code executable.
    pub claude: PathBuf,
}

impl Paths {
    pub fn from_env() -> Self {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Paths {
            workspace: var(wire::ENV_WORKSPACE).unwrap_or_else(|| wire::WORKSPACE.into()),
            claude: var(wire::ENV_CLAUDE).unwrap_or_else(|| wire::CLAUDE_EXE.into()),
        }
    }

    /// The group's folder and the agent's working directory.
    pub fn group(&self) -> PathBuf {
        self.workspace.join(in_workspace(wire::GROUP_DIR))
    }

    /// Read-only memory shared by non-main groups.
    pub fn global_memory(&self) -> PathBuf {
        self.workspace
            .join(in_workspace(wire::GLOBAL_DIR))
            .join(wire::MEMORY_FILE)
    }

    pub fn ipc(&self) -> PathBuf {
        self.workspace.join(in_workspace(wire::IPC_DIR))
    }

    /// Host → agent messages (`*.json`) and the `_close` sentinel.
    pub fn input(&self) -> PathBuf {
        self.ipc().join(ipc::INPUT_DIR)
    }

    /// Agent → host events (hook records, archive notices).
    pub fn events(&self) -> PathBuf {
        self.ipc().join(ipc::EVENTS_DIR)
    }

    /// Files that could not be read, kept for a person to look at.
    pub fn errors(&self) -> PathBuf {
        self.ipc().join(ipc::ERRORS_DIR)
    }

    /// The group's model gateway socket.
    pub fn model_socket(&self) -> PathBuf {
        self.ipc().join(ipc::MODEL_SOCKET)
    }
}

pub use g2_core::ipc::{timestamped_name as event_name, write_atomic};
