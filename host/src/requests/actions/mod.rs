//! Carrying out the agents' actions, one file per family of the matrix
//! (`super::authorize`): each asks [`authorize::check`] about what it acts
//! on, does it through the domain modules, and builds the text the agent
//! reads back.

use g2_core::wire::Action;

use super::RequestServer;
use super::authorize;
use crate::Result;
use g2_core::validate::GroupFolder;

mod groups;
mod memory;
mod messages;
mod sessions;
mod tasks;

impl RequestServer {
    /// Carries out `action` for group `folder` as for its own agent, for a
    /// caller outside the group's container that speaks for the group
    /// (a user's MCP client, by its token): the same matrix and checks,
    /// the same text back. Not recorded in `ipc_log` (the caller keeps
    /// its own record).
    pub async fn act_for(&self, folder: &GroupFolder, action: Action) -> Result<String> {
        self.act(folder, action).await
    }

    /// Carries out `action` for the group whose IPC folder is `folder`.
    pub(super) async fn act(&self, folder: &GroupFolder, action: Action) -> Result<String> {
        let me = authorize::source(&self.store, folder).await?;
        match action {
            Action::ClearSession { name } => self.clear_session(&me, &name).await,
            Action::ListSessions {} => self.list_sessions(&me).await,
            Action::MemorySearch {
                query,
                limit,
                kind,
                since,
            } => {
                let filters = crate::memory::recall::Filters {
                    kind,
                    since,
                    asked: None,
                };
                self.memory_search(&me, &query, limit.unwrap_or(10), filters)
                    .await
            }
            Action::MemoryTimeline {
                id,
                query,
                before,
                after,
            } => {
                self.memory_timeline(
                    &me,
                    id.as_deref(),
                    query.as_deref(),
                    before.unwrap_or(2),
                    after.unwrap_or(2),
                )
                .await
            }
            Action::MemoryGet { ids } => self.memory_get(&me, &ids).await,
            Action::Remember { text } => self.remember(&me, &text).await,
            Action::Forget { id } => self.forget(&me, &id).await,
            Action::ResumeSession {
                history_id,
                save_current_as,
            } => {
                self.resume_session(&me, history_id, save_current_as.as_deref())
                    .await
            }
            Action::SearchSessions { query, limit } => {
                self.search_sessions(&me, &query, limit.unwrap_or(10)).await
            }
            Action::SendMessage { text, chat_jid } => self.send_message(&me, &text, chat_jid).await,
            Action::ScheduleTask {
                prompt,
                schedule_type,
                schedule_value,
                timezone,
                context_mode,
                group_folder,
            } => {
                let target = self.task_target(&me, group_folder.as_deref()).await?;
                self.schedule_task(crate::tasks::NewTask {
                    group_folder: target.folder.to_string(),
                    chat_jid: target.jid,
                    prompt,
                    schedule_type,
                    schedule_value,
                    timezone,
                    context_mode,
                })
                .await
            }
            Action::ListTasks {} => self.list_tasks(&me).await,
            Action::PauseTask { task_id } => {
                self.task_status(&me, &task_id, crate::tasks::StatusAction::Pause)
                    .await
            }
            Action::ResumeTask { task_id } => {
                self.task_status(&me, &task_id, crate::tasks::StatusAction::Resume)
                    .await
            }
            Action::CancelTask { task_id } => {
                self.task_status(&me, &task_id, crate::tasks::StatusAction::Cancel)
                    .await
            }
            Action::RegisterGroup {
                folder: new_folder,
                name,
                jid,
                trigger,
                requires_trigger,
            } => {
                self.register_group(
                    &me,
                    crate::groups::NewGroup {
                        folder: new_folder,
                        name,
                        jid,
                        trigger_pattern: trigger,
                        requires_trigger,
                        is_main: false,
                    },
                )
                .await
            }
            Action::RefreshGroups {} => self.refresh_groups(&me).await,
        }
    }
}
