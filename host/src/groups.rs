//! Registered groups: the chat groups the host serves.
//!
//! A group's `folder` is its identity everywhere (sessions, archives, IPC)
//! and is validated before it is stored. At most one group is main; the
//! database enforces it with a partial unique index.

use crate::config::GroupContainerConfig;
use crate::store;
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

pub use crate::store::groups::Group;

/// Longest trigger pattern accepted.
pub const MAX_TRIGGER: usize = 1024;

/// Compiles a trigger pattern with bounds on nesting and compiled size:
/// a pattern comes from a person or an agent, and a deeply nested one would
/// otherwise exhaust the compiling thread's stack.
pub fn trigger_regex(pattern: &str) -> std::result::Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .nest_limit(32)
        .size_limit(1 << 20)
        .build()
}

/// What `add` needs; the rest gets defaults.
#[derive(Debug, Clone, Default)]
pub struct NewGroup {
    pub folder: String,
    pub name: String,
    /// Default: `local:{folder}`.
    pub jid: Option<String>,
    /// Default: `(?i)^@{assistant}\b`.
    pub trigger_pattern: Option<String>,
    /// Default: required, except for the main group.
    pub requires_trigger: Option<bool>,
    pub is_main: bool,
}

/// The groups as the main group's agent sees them (`available_groups.json`).
pub fn snapshot(list: &[Group]) -> serde_json::Value {
    list.iter()
        .map(|g| serde_json::json!({ "folder": g.folder, "name": g.name, "jid": g.jid, "isMain": g.is_main }))
        .collect()
}

/// The trigger a group gets when none is given.
pub fn default_trigger(assistant_name: &str) -> String {
    format!(r"(?i)^@{}\b", regex::escape(assistant_name))
}

impl NewGroup {
    /// Validates and fills in defaults.
    pub fn into_group(self, assistant_name: &str) -> Result<Group> {
        let folder = GroupFolder::new(self.folder)?;
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 200 || name.contains('\n') {
            return Err(Error::Invalid(format!(
                "group name {:?}: use 1-200 characters on one line",
                self.name
            )));
        }
        crate::terminal::check_name("group name", name)?;
        let jid = self.jid.unwrap_or_else(|| format!("local:{folder}"));
        if jid.trim().is_empty() || jid.len() > 512 {
            return Err(Error::Invalid(format!("jid {jid:?} is empty or too long")));
        }
        crate::jid::check(&jid)?;
        let pattern = self
            .trigger_pattern
            .unwrap_or_else(|| default_trigger(assistant_name));
        if pattern.len() > MAX_TRIGGER {
            return Err(Error::Invalid(format!(
                "trigger pattern: at most {MAX_TRIGGER} bytes"
            )));
        }
        trigger_regex(&pattern)
            .map_err(|e| Error::Invalid(format!("trigger pattern {pattern:?}: {e}")))?;
        Ok(Group {
            folder,
            name: name.to_string(),
            jid,
            trigger_pattern: Some(pattern),
            requires_trigger: self.requires_trigger.unwrap_or(!self.is_main),
            is_main: self.is_main,
            container_config: GroupContainerConfig::default(),
            added_at: crate::now_rfc3339(),
        })
    }
}

/// Registers a group: validates it and fills in defaults, stores it, and
/// creates its folder (the CLI, the API and the main group's agent all
/// register through here).
pub async fn register(
    store: &store::Store,
    home: &crate::home::Home,
    new: NewGroup,
    assistant_name: &str,
) -> Result<Group> {
    let group = new.into_group(assistant_name)?;
    home.ensure_layout()?;
    let g = group.clone();
    store.write(move |tx| store::groups::add(tx, &g)).await?;
    home.ensure_group(&group.folder, &group.name, group.is_main)?;
    Ok(group)
}

/// A registered group by folder, or `NotFound`.
pub async fn require(store: &store::Store, folder: &GroupFolder) -> Result<Group> {
    let f = folder.clone();
    store
        .read(move |c| store::groups::get(c, &f))
        .await?
        .ok_or_else(|| Error::NotFound(format!("group {folder:?}")))
}

/// Every registered group, the main group first.
pub async fn list(store: &store::Store) -> Result<Vec<Group>> {
    store.read(store::groups::list).await
}

/// Unregisters a group (its folder and memory stay); returns it as it was.
pub async fn remove(store: &store::Store, folder: &GroupFolder) -> Result<Group> {
    let f = folder.clone();
    store.write(move |tx| store::groups::remove(tx, &f)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::groups::{add, list, remove};

    fn store() -> (tempfile::TempDir, store::Store) {
        let dir = tempfile::tempdir().unwrap();
        let s = store::Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(1))
            .unwrap();
        (dir, s)
    }

    #[test]
    fn deeply_nested_trigger_patterns_are_refused_not_a_crash() {
        let deep = format!("{}a{}", "(".repeat(5000), ")".repeat(5000));
        let g = NewGroup {
            folder: "x".into(),
            name: "X".into(),
            trigger_pattern: Some(deep),
            ..Default::default()
        };
        assert!(g.into_group("Andy").is_err());
        let nested = format!("{}a{}", "(?:".repeat(200), ")".repeat(200));
        assert!(trigger_regex(&nested).is_err());
        assert!(trigger_regex("(?i)^@andy\\b").is_ok());
    }

    #[test]
    fn telegram_jids_are_checked_at_registration() {
        let g = |jid: &str| {
            NewGroup {
                folder: "tg".into(),
                name: "TG".into(),
                jid: Some(jid.into()),
                ..Default::default()
            }
            .into_group("G2")
        };
        assert!(g("tg:-1001234567890").is_ok() && g("tg:-100123:4").is_ok());
        let e = g("tg:family").unwrap_err().to_string();
        assert!(e.contains("tg:<chat_id>"), "{e}");
    }

    #[test]
    fn defaults_and_conflicts() {
        let (_d, s) = store();
        let main = NewGroup {
            folder: "main".into(),
            name: "Main".into(),
            is_main: true,
            ..Default::default()
        }
        .into_group("G2")
        .unwrap();
        assert!(!main.requires_trigger);
        let dev = NewGroup {
            folder: "dev".into(),
            name: "Dev".into(),
            ..Default::default()
        }
        .into_group("G2")
        .unwrap();
        assert!(dev.requires_trigger);
        assert_eq!(dev.jid, "local:dev");
        let re = regex::Regex::new(dev.trigger_pattern.as_deref().unwrap()).unwrap();
        assert!(re.is_match("@g2 hello") && !re.is_match("hello @G2") && !re.is_match("@G2x"));

        s.write_blocking(|tx| add(tx, &main)).unwrap();
        s.write_blocking(|tx| add(tx, &dev)).unwrap();
        let again = s.write_blocking(|tx| add(tx, &dev)).unwrap_err();
        assert!(matches!(again, Error::Conflict(_)), "{again}");
        let second_main = NewGroup {
            folder: "other".into(),
            name: "O".into(),
            is_main: true,
            ..Default::default()
        }
        .into_group("G2")
        .unwrap();
        assert!(matches!(
            s.write_blocking(|tx| add(tx, &second_main)),
            Err(Error::Conflict(_))
        ));
        let same_jid = NewGroup {
            folder: "x".into(),
            name: "X".into(),
            jid: Some("local:dev".into()),
            ..Default::default()
        }
        .into_group("G2")
        .unwrap();
        assert!(matches!(
            s.write_blocking(|tx| add(tx, &same_jid)),
            Err(Error::Conflict(_))
        ));

        let all = s.read_blocking(list).unwrap();
        assert_eq!(
            all.iter().map(|g| g.folder.as_str()).collect::<Vec<_>>(),
            ["main", "dev"]
        );
        let dev = GroupFolder::new("dev").unwrap();
        s.write_blocking(|tx| remove(tx, &dev)).unwrap();
        assert!(matches!(
            s.write_blocking(|tx| remove(tx, &dev)),
            Err(Error::NotFound(_))
        ));
    }

    #[test]
    fn invalid_groups_are_refused() {
        for (folder, name, trigger) in [
            ("../etc", "x", None),
            ("global", "x", None),
            ("ok", "", None),
            ("ok", "x", Some("(unclosed")),
        ] {
            let g = NewGroup {
                folder: folder.into(),
                name: name.into(),
                trigger_pattern: trigger.map(Into::into),
                ..Default::default()
            };
            assert!(
                g.into_group("G2").is_err(),
                "{folder:?} {name:?} {trigger:?}"
            );
        }
    }
}
