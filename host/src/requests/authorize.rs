//! Who may do what: the authorization matrix of the agents' requests, as
//! data ([`MATRIX`]), and the one function that decides ([`may`]).
//!
//! **Identity is the folder.** The group a request acts for is the IPC
//! folder it was found in ([`source`]): a folder that is not a registered
//! group has no rights at all, and a request naming another group in a
//! field its action does not have is refused ([`forged`]). Then every
//! action asks [`may`] whether its source group may act on what it names,
//! by the action's family:
//!
//! | family | actions | main group | other groups |
//! |---|---|---|---|
//! | sessions | clear_session, list_sessions, resume_session, search_sessions | its own | its own |
//! | memory | memory_search, memory_timeline, memory_get, remember, forget | its own | its own |
//! | messages | send_message | any | its own |
//! | tasks | schedule_task, list_tasks, pause_task, resume_task, cancel_task | any | its own |
//! | groups | register_group, refresh_groups | yes | no |
//!
//! ("any": its own or any other group's chat or tasks; a chat must still be
//! known, which is not a question of rights.) A unit test renders this table
//! from [`MATRIX`] and finds it above.

use g2_core::wire::Action;

use crate::groups::{self, Group};
use crate::store::Store;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// The actions that are authorized alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Sessions,
    Memory,
    Messages,
    Tasks,
    Groups,
}

/// What a family lets a group reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Every group acts on its own only, the main group too.
    Own,
    /// The main group on any group's, the others on their own only.
    AnyForMain,
    /// The main group only.
    MainOnly,
}

/// The matrix: each family, its actions (wire names) and its reach.
pub const MATRIX: [(Family, &[&str], Reach); 5] = [
    (
        Family::Sessions,
        &[
            "clear_session",
            "list_sessions",
            "resume_session",
            "search_sessions",
        ],
        Reach::Own,
    ),
    (
        Family::Memory,
        &[
            "memory_search",
            "memory_timeline",
            "memory_get",
            "remember",
            "forget",
        ],
        Reach::Own,
    ),
    (Family::Messages, &["send_message"], Reach::AnyForMain),
    (
        Family::Tasks,
        &[
            "schedule_task",
            "list_tasks",
            "pause_task",
            "resume_task",
            "cancel_task",
        ],
        Reach::AnyForMain,
    ),
    (
        Family::Groups,
        &["register_group", "refresh_groups"],
        Reach::MainOnly,
    ),
];

impl Family {
    /// The family of an action, looked up in [`MATRIX`] by its wire name.
    pub fn of(action: &Action) -> Family {
        let name = action.name();
        MATRIX
            .iter()
            .find(|(_, actions, _)| actions.contains(&name))
            .map(|(family, _, _)| *family)
            // Unreachable while the matrix test covers every action; an
            // unlisted action gets the narrowest rights.
            .unwrap_or(Family::Groups)
    }

    /// The family's reach in [`MATRIX`].
    pub fn reach(self) -> Reach {
        MATRIX
            .iter()
            .find(|(family, _, _)| *family == self)
            .map_or(Reach::MainOnly, |(_, _, reach)| *reach)
    }
}

/// The one decision: may `me` act, in `family`, on its own things
/// (`own`) or on another group's (`!own`)?
pub fn may(me: &Group, family: Family, own: bool) -> bool {
    match family.reach() {
        Reach::Own => own,
        Reach::AnyForMain => own || me.is_main,
        Reach::MainOnly => me.is_main,
    }
}

/// [`may`], refusing with `why` (the text the agent reads after
/// "not allowed: ").
pub fn check(me: &Group, family: Family, own: bool, why: impl FnOnce() -> String) -> Result<()> {
    if may(me, family, own) {
        Ok(())
    } else {
        Err(Error::Forbidden(why()))
    }
}

/// What `me` sees of a family: `None` for everything (it may act on any
/// group's), else only its own folder's.
pub fn scope(me: &Group, family: Family) -> Option<GroupFolder> {
    (!may(me, family, false)).then(|| me.folder.clone())
}

/// The group a request acts for: the folder it was found in, which must
/// be a registered group.
pub async fn source(store: &Store, folder: &GroupFolder) -> Result<Group> {
    match groups::require(store, folder).await {
        Err(Error::NotFound(_)) => Err(Error::Forbidden(format!(
            "{folder} is not a registered group"
        ))),
        other => other,
    }
}

/// Refuses a request whose payload names another group (`named`, a field
/// its action does not have) than the folder it came from.
pub fn forged(action: &Action, folder: &str, named: Option<&str>) -> Result<()> {
    match named {
        Some(other) if other != folder => Err(Error::Forbidden(format!(
            "{} acts on the group whose folder the request is in ({folder}), never on {other}",
            action.name()
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(folder: &str, is_main: bool) -> Group {
        Group {
            folder: GroupFolder::new(folder).unwrap(),
            name: folder.into(),
            jid: format!("local:{folder}"),
            trigger_pattern: None,
            requires_trigger: !is_main,
            is_main,
            container_config: Default::default(),
            added_at: "2025-01-01T00:00:00Z".into(),
        }
    }

    fn every_action() -> Vec<Action> {
        let task = || "task-1".to_string();
        vec![
            Action::ClearSession { name: "x".into() },
            Action::ListSessions {},
            Action::ResumeSession {
                history_id: 1,
                save_current_as: None,
            },
            Action::SearchSessions {
                query: "x".into(),
                limit: None,
            },
            Action::SendMessage {
                text: "x".into(),
                chat_jid: None,
            },
            Action::ScheduleTask {
                prompt: "x".into(),
                schedule_type: "once".into(),
                schedule_value: "x".into(),
                timezone: None,
                context_mode: None,
                group_folder: None,
            },
            Action::ListTasks {},
            Action::PauseTask { task_id: task() },
            Action::ResumeTask { task_id: task() },
            Action::CancelTask { task_id: task() },
            Action::RegisterGroup {
                folder: "x".into(),
                name: "x".into(),
                jid: None,
                trigger: None,
                requires_trigger: None,
            },
            Action::RefreshGroups {},
            Action::MemorySearch {
                query: "x".into(),
                limit: None,
                kind: None,
                since: None,
            },
            Action::MemoryTimeline {
                id: None,
                query: Some("x".into()),
                before: None,
                after: None,
            },
            Action::MemoryGet {
                ids: vec!["o1".into()],
            },
            Action::Remember { text: "x".into() },
            Action::Forget { id: "o1".into() },
        ]
    }

    /// The table of the module doc, rendered from the data.
    fn table() -> Vec<String> {
        MATRIX
            .iter()
            .map(|(family, actions, _)| {
                let cell = |is_main| {
                    let me = group("me", is_main);
                    match (may(&me, *family, true), may(&me, *family, false)) {
                        (true, true) => "any",
                        (true, false) => "its own",
                        (false, false) => "no",
                        (false, true) => "other groups' only",
                    }
                };
                let main = match family.reach() {
                    Reach::MainOnly => "yes",
                    _ => cell(true),
                };
                format!(
                    "//! | {} | {} | {main} | {} |",
                    format!("{family:?}").to_lowercase(),
                    actions.join(", "),
                    cell(false)
                )
            })
            .collect()
    }

    #[test]
    fn the_doc_table_is_the_matrix() {
        let source = include_str!("authorize.rs");
        for row in table() {
            assert!(source.contains(&format!("\n{row}\n")), "missing: {row}");
        }
    }

    #[test]
    fn every_action_is_in_exactly_one_family() {
        for action in every_action() {
            let rows: Vec<_> = MATRIX
                .iter()
                .filter(|(_, actions, _)| actions.contains(&action.name()))
                .collect();
            assert_eq!(rows.len(), 1, "{}", action.name());
            assert_eq!(Family::of(&action), rows[0].0);
        }
        let listed: usize = MATRIX.iter().map(|(_, a, _)| a.len()).sum();
        assert_eq!(listed, every_action().len(), "no stray names");
    }

    #[test]
    fn each_row_of_the_matrix() {
        let (main, other) = (group("main", true), group("family", false));
        // (family, main on own, main on another's, other on own, other on another's)
        let rows = [
            (Family::Sessions, true, false, true, false),
            (Family::Messages, true, true, true, false),
            (Family::Tasks, true, true, true, false),
            (Family::Groups, true, true, false, false),
        ];
        for (family, m_own, m_other, o_own, o_other) in rows {
            assert_eq!(may(&main, family, true), m_own, "{family:?}");
            assert_eq!(may(&main, family, false), m_other, "{family:?}");
            assert_eq!(may(&other, family, true), o_own, "{family:?}");
            assert_eq!(may(&other, family, false), o_other, "{family:?}");
        }
        assert_eq!(scope(&main, Family::Tasks), None);
        assert_eq!(scope(&other, Family::Tasks).as_deref(), Some("family"));
        assert_eq!(scope(&main, Family::Sessions).as_deref(), Some("main"));
    }

    #[test]
    fn a_forged_group_field_is_refused() {
        let a = Action::ListSessions {};
        assert!(forged(&a, "family", None).is_ok());
        assert!(forged(&a, "family", Some("family")).is_ok());
        let Err(Error::Forbidden(why)) = forged(&a, "family", Some("work")) else {
            panic!("a forged field passes");
        };
        assert_eq!(
            why,
            "list_sessions acts on the group whose folder the request is in (family), never on work"
        );
    }
}
