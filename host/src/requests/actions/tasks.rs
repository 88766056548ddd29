//! `schedule_task`, `list_tasks`, `pause_task`, `resume_task`,
//! `cancel_task`: a group's own tasks, any group's for main. A change wakes
//! the scheduler (`Links::tasks_changed`).

use g2_core::validate::GroupFolder;

use crate::groups::{self, Group};
use crate::requests::RequestServer;
use crate::requests::authorize::{self, Family};
use crate::tasks::{self, NewTask, StatusAction};
use crate::{Error, Result};

impl RequestServer {
    /// The group a task is scheduled for: its own, or (main only) another
    /// registered group.
    pub(super) async fn task_target(&self, me: &Group, named: Option<&str>) -> Result<Group> {
        match named {
            None => Ok(me.clone()),
            Some(f) if f == me.folder => Ok(me.clone()),
            Some(f) => {
                authorize::check(me, Family::Tasks, false, || {
                    format!(
                        "group {} may only schedule tasks for itself, not for {f}",
                        me.folder
                    )
                })?;
                // A folder named in the request: checked where it comes in.
                groups::require(&self.store, &GroupFolder::new(f)?).await
            }
        }
    }

    pub(super) async fn schedule_task(&self, mut new: NewTask) -> Result<String> {
        // Stored, and shown by list_tasks and the API: cleaned like all an
        // agent asks g2 to keep (a prompt left empty is refused).
        new.prompt = self.sessions.redactor().clean(&new.prompt).into_owned();
        let t = self
            .store
            .write(move |tx| tasks::create(tx, new, chrono::Utc::now()))
            .await?;
        self.tasks_changed();
        Ok(format!(
            "Scheduled task {} for {} ({} {} {}, {} context). Next run: {}.",
            t.id,
            t.group_folder,
            t.schedule_type,
            t.schedule_value,
            t.timezone,
            t.context_mode,
            t.next_run.as_deref().unwrap_or("none")
        ))
    }

    pub(super) async fn list_tasks(&self, me: &Group) -> Result<String> {
        let list = tasks::list(&self.store, authorize::scope(me, Family::Tasks)).await?;
        if list.is_empty() {
            return Ok("No scheduled tasks.".into());
        }
        let mut s = String::from("Scheduled tasks:");
        for t in list {
            s.push_str(&format!(
                "\n{} [{}] {} {} {} ({}): next {}, last {}: {}",
                t.id,
                t.status,
                t.group_folder,
                t.schedule_type,
                t.schedule_value,
                t.timezone,
                t.next_run.as_deref().unwrap_or("-"),
                t.last_run.as_deref().unwrap_or("-"),
                t.prompt.chars().take(80).collect::<String>()
            ));
        }
        Ok(s)
    }

    pub(super) async fn task_status(
        &self,
        me: &Group,
        id: &str,
        action: StatusAction,
    ) -> Result<String> {
        let i = id.to_string();
        let task = self
            .store
            .read(move |c| crate::store::tasks::get(c, &i))
            .await?
            .ok_or_else(|| Error::NotFound(format!("task {id:?}")))?;
        authorize::check(me, Family::Tasks, task.group_folder == me.folder, || {
            format!(
                "task {id} belongs to group {}, not to {}",
                task.group_folder, me.folder
            )
        })?;
        let (i, scope) = (id.to_string(), authorize::scope(me, Family::Tasks));
        let t = self
            .store
            .write(move |tx| {
                tasks::set_status(tx, &i, scope.as_deref(), action, chrono::Utc::now())
            })
            .await?;
        self.tasks_changed();
        Ok(format!("Task {} is {}.", t.id, t.status))
    }
}
