//! Before a run: the group's folders made real (beneath confined handles),
//! g2's hooks in `.claude/settings.json`, the read-only snapshots the agent
//! reads (`session_history.json`, `current_tasks.json`,
//! `available_groups.json`), and ownership for the agent's uid when the host
//! is root.
//!
//! Boundary: [`Agents::prepare`](super::Agents) is called by a run only;
//! [`HOOK_EVENTS`] is the list of hooks every group gets.

use serde_json::{Value, json};

use g2_core::confined::Dir;
use g2_core::{ipc, wire};

use super::Agents;
use crate::Result;
use crate::config::GroupMemoryConfig;
use crate::groups::{self, Group};
use crate::home::Home;
use crate::store;
use g2_core::validate::GroupFolder;

/// Hooks registered in every group's `.claude/settings.json` (the runner
/// answers the same list).
pub use g2_core::wire::HOOK_EVENTS;

impl Agents {
    /// Folders, ownership and hooks a run needs. Everything in the group's
    /// trees is done beneath directory handles that never follow a link
    /// ([`g2_core::confined`]); a folder replaced by the agent is made real
    /// again and recorded.
    pub(super) fn prepare(&self, group: &Group) -> Result<()> {
        let folder = &group.folder;
        self.home.ensure_layout()?;
        self.home.ensure_group(folder, &group.name, group.is_main)?;
        let ipc_tree = self.home.ipc_tree(folder)?;
        for d in [
            ipc::INPUT_DIR,
            ipc::EVENTS_DIR,
            ipc::ERRORS_DIR,
            ipc::TASKS_DIR,
            ipc::MESSAGES_DIR,
            ipc::RESPONSES_DIR,
        ] {
            self.home.ensure_sub(folder, &ipc_tree, d)?;
        }
        // Claude Code keeps its transcripts here: a link in their place
        // would send them elsewhere (and break the group).
        let claude = self.home.claude_tree(folder)?;
        let projects = self.home.ensure_sub(folder, &claude, "projects")?;
        self.home
            .ensure_sub(folder, &projects, crate::home::PROJECT_DIR)?;
        write_hooks(
            &self.home,
            folder,
            &hook_events(&group.container_config.memory),
        )?;
        self.write_snapshots(group, &ipc_tree)?;
        // The tops of the trees belong to the agent; everything beneath is
        // given to it by the disk counts (which walk it all anyway).
        if let Some((uid, gid)) = crate::home::agent_owner() {
            for tree in [self.home.group_tree(folder)?, claude, ipc_tree] {
                tree.chown_top(uid, gid);
            }
        }
        Ok(())
    }

    /// Read-only snapshots for the agent, written before each start:
    /// `session_history.json`, `current_tasks.json` (the group's tasks; all
    /// tasks for main) and `available_groups.json` (empty unless main).
    fn write_snapshots(&self, group: &Group, ipc_tree: &Dir) -> Result<()> {
        let (folder, is_main) = (group.folder.clone(), group.is_main);
        let (history, tasks, groups) = self.store.read_blocking(move |c| {
            let history = crate::sessions::history(c, &folder)?;
            let tasks: Vec<Value> = store::tasks::list(c, (!is_main).then_some(folder.as_str()))?
                .into_iter()
                .map(|t| {
                    json!({
                        "id": t.id, "groupFolder": t.group_folder, "prompt": t.prompt,
                        "scheduleType": t.schedule_type, "scheduleValue": t.schedule_value,
                        "status": t.status, "nextRun": t.next_run,
                    })
                })
                .collect();
            let groups = if is_main {
                store::groups::list(c)?
            } else {
                Vec::new()
            };
            Ok((history, tasks, groups))
        })?;
        for (name, v) in [
            (
                ipc::SESSION_HISTORY,
                serde_json::to_value(&history).unwrap_or_default(),
            ),
            (ipc::CURRENT_TASKS, Value::Array(tasks)),
            (ipc::AVAILABLE_GROUPS, groups::snapshot(&groups)),
        ] {
            let r = ipc_tree.write_atomic(name, &serde_json::to_vec_pretty(&v).unwrap_or_default());
            self.home.confined(&group.folder, name, r)?;
        }
        Ok(())
    }
}

/// The hooks a group's sessions need: every one of [`HOOK_EVENTS`] while
/// its capture is on; with capture off, `SessionStart` only while
/// injection is on, and `PreCompact`, which archives a transcript before it
/// is compacted, always. Claude Code starts a process for every registered
/// hook and waits for it: a hook with nothing to do is not registered, and
/// a warm turn's prompt and reply are the runner's to capture (none of
/// these runs on a turn without tools).
pub fn hook_events(memory: &GroupMemoryConfig) -> Vec<&'static str> {
    HOOK_EVENTS
        .iter()
        .copied()
        .filter(|ev| match *ev {
            wire::PRE_COMPACT => true,
            wire::SESSION_START => memory.captures() || memory.injects(),
            _ => memory.captures(),
        })
        .collect()
}

/// Registers `events`' hooks in a group's `.claude/settings.json`, keeping
/// any other settings in the file.
fn write_hooks(home: &Home, folder: &GroupFolder, events: &[&str]) -> Result<()> {
    let tree = home.claude_tree(folder)?;
    // The agent can write here: never read through a link it planted (a
    // link is replaced by the write below).
    let mut settings: Value = match tree.read("settings.json", 1 << 20) {
        Ok(t) => serde_json::from_slice(&t)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({})),
        Err(e) if g2_core::confined::is_planted(&e) => {
            home.planted(folder, ".claude/settings.json: a link; replaced");
            json!({})
        }
        Err(_) => json!({}),
    };
    settings["hooks"] = hook_settings(wire::AGENT_EXE, events);
    let r = tree.write_atomic(
        "settings.json",
        &serde_json::to_vec_pretty(&settings).unwrap_or_default(),
    );
    home.confined(folder, ".claude/settings.json", r)
}

/// The `hooks` object of a `settings.json`: each of `events` running `exe
/// hook <event>` in exec form, without a shell (in a group `exe` is
/// [`wire::AGENT_EXE`]; the turn bench points it at a built binary).
pub fn hook_settings(exe: &str, events: &[&str]) -> Value {
    let mut hooks = serde_json::Map::new();
    for ev in events {
        hooks.insert(
            ev.to_string(),
            json!([{ "hooks": [{
                "type": "command",
                "command": exe,
                "args": wire::hook_args(ev),
                "timeout": wire::HOOK_TIMEOUT_SECS,
            }] }]),
        );
    }
    Value::Object(hooks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_keep_other_settings() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        let main = GroupFolder::new("main").unwrap();
        let claude = home.claude_dir(&main).unwrap();
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::write(
            claude.join("settings.json"),
            r#"{"model":"x","hooks":{"Old":[]}}"#,
        )
        .unwrap();
        write_hooks(&home, &main, HOOK_EVENTS).unwrap();
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(claude.join("settings.json")).unwrap())
                .unwrap();
        assert_eq!(v["model"], "x");
        assert!(v["hooks"].get("Old").is_none());
        let hook = &v["hooks"]["PreCompact"][0]["hooks"][0];
        assert_eq!(hook["command"], "/usr/local/bin/g2-agent");
        assert_eq!(hook["args"], json!(["hook", "PreCompact"]));
    }

    #[test]
    fn a_hook_with_nothing_to_do_is_not_registered() {
        let config = |capture, inject| GroupMemoryConfig {
            capture: Some(capture),
            inject: Some(inject),
        };
        assert_eq!(hook_events(&GroupMemoryConfig::default()), HOOK_EVENTS);
        assert_eq!(hook_events(&config(true, false)), HOOK_EVENTS);
        assert_eq!(
            hook_events(&config(false, true)),
            [wire::PRE_COMPACT, wire::SESSION_START]
        );
        assert_eq!(hook_events(&config(false, false)), [wire::PRE_COMPACT]);
    }
}
