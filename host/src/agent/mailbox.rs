//! The host → agent mailbox: the group's `input/` folder. Follow-ups (one
//! file, one turn), the `_close` sentinel that asks the agent to finish, and
//! clearing what an earlier container left there.
//!
//! Boundary: every write goes through a temp file and a rename beneath the
//! group's confined `input/` handle; nothing here reads what the agent
//! wrote.

use g2_core::ipc;
use g2_core::wire::InputMessage;

use super::Agents;
use crate::Result;
use crate::home::Home;
use g2_core::validate::GroupFolder;

impl Agents {
    /// Removes what an earlier container of the group left in its `input/`
    /// (a `_close`, follow-ups it never took): they must not end the next
    /// run nor be answered twice — unanswered messages are in the next
    /// prompt, since the router's cursor did not move past them. Called by
    /// whoever starts a run, before anything may write a new input.
    pub fn clear_inputs(&self, folder: &GroupFolder) -> Result<()> {
        let dir = self.home.ipc_sub(folder, ipc::INPUT_DIR)?;
        let _ = dir.remove(ipc::CLOSE);
        for name in dir.pending() {
            let _ = dir.remove(&name);
        }
        Ok(())
    }
}

/// Asks the agent to finish: the `_close` sentinel.
pub fn close(home: &Home, folder: &GroupFolder) -> Result<()> {
    let dir = home.ipc_sub(folder, ipc::INPUT_DIR)?;
    let r = dir.write_atomic(ipc::CLOSE, b"");
    home.confined(folder, "input/_close", r)
}

/// Writes a message for a running agent into its `input/` folder; returns
/// the file's name.
pub fn send_follow_up(home: &Home, folder: &GroupFolder, text: &str) -> Result<String> {
    let dir = home.ipc_sub(folder, ipc::INPUT_DIR)?;
    let msg = serde_json::to_vec(&InputMessage::Message {
        text: text.to_string(),
    })?;
    let name = ipc::timestamped_name();
    let r = dir.write_atomic(&name, &msg);
    home.confined(folder, "input/", r)?;
    Ok(name)
}
