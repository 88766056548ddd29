//! Conversation archives: transcripts turned into markdown files under
//! `groups/{folder}/conversations/`, recorded in `conversation_archives` and
//! indexed for full-text search.
//!
//! Writing is two steps so that the database never names a file that is not
//! there: [`prepare`] parses, renders and writes the file (atomically, never
//! overwriting); `store::archives::insert` records and indexes it inside the caller's
//! transaction, which may carry other writes (the session pointer and
//! history, for a clear). If that transaction fails (or does not commit), the
//! caller removes the file again.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Local};
use serde::{Deserialize, Serialize};

use g2_core::{archive, transcript, validate};

use crate::error::IoContext;
use crate::home::Home;
use crate::store::{self, Store};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

/// What started an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// The session was cleared (or left for another one).
    Clear,
    /// Claude Code compacted the session.
    Precompact,
    /// Someone ran `g2 archive`.
    Manual,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Clear => "clear",
            Trigger::Precompact => "precompact",
            Trigger::Manual => "manual",
        }
    }
}

/// A row of `conversation_archives`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveRecord {
    pub id: i64,
    pub group: GroupFolder,
    pub session_id: Option<String>,
    /// The archive's title.
    pub name: String,
    /// Relative to the home directory.
    pub path: String,
    pub trigger: Trigger,
    pub created_at: String,
}

/// An archive file written but not yet recorded.
#[derive(Debug)]
pub struct Prepared {
    pub group: GroupFolder,
    pub session_id: Option<String>,
    pub title: String,
    /// The file's name in the group's `conversations/`.
    pub file_name: String,
    /// Path as stored (relative to the home).
    pub rel_path: String,
    pub body: String,
    pub trigger: Trigger,
    pub created_at: String,
    /// Parser counts, for reporting.
    pub stats: transcript::Stats,
}

impl Prepared {
    /// An archive file the agent's PreCompact hook wrote into the group's
    /// `conversations/` folder, ready to be recorded. `rel` is relative to
    /// the group folder and must stay inside `conversations/`.
    pub fn adopt(
        home: &Home,
        group: &GroupFolder,
        rel: &str,
        title: &str,
        session_id: Option<&str>,
    ) -> Result<Prepared> {
        let name = rel
            .strip_prefix(g2_core::wire::CONVERSATIONS_DIR)
            .and_then(|r| r.strip_prefix('/'))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "archive notice path {rel:?} is not in conversations/"
                ))
            })?;
        if name.contains('/') || name.starts_with('.') || !name.ends_with(".md") {
            return Err(Error::Invalid(format!(
                "archive notice path {rel:?} is not a markdown file in conversations/"
            )));
        }
        // The agent wrote this file: read it only if it is one (no link).
        let dir = home.conversations_tree(group)?;
        let bytes = home.confined(group, rel, dir.read(name, 64 << 20))?;
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let title: String = title
            .chars()
            .filter(|c| !c.is_control())
            .take(200)
            .collect();
        Ok(Prepared {
            group: group.clone(),
            session_id: session_id.and_then(|s| validate::session_id(s).ok()),
            title: if title.trim().is_empty() {
                name.trim_end_matches(".md").to_string()
            } else {
                title
            },
            rel_path: rel_path(group, name),
            file_name: name.to_string(),
            body,
            trigger: Trigger::Precompact,
            created_at: crate::now_rfc3339(),
            stats: transcript::Stats::default(),
        })
    }

    /// The file's absolute path, for people.
    pub fn path(&self, home: &Home) -> PathBuf {
        home.resolve(&self.rel_path)
    }
}

/// Removes an archive file again, beneath its group's folder (its record
/// did not commit: the folder never holds an archive the database does not
/// know).
pub fn discard(home: &Home, group: &GroupFolder, file_name: &str) {
    if let Ok(dir) = home.conversations_tree(group) {
        let _ = dir.remove(file_name);
    }
}

/// An archive's path as stored: relative to the home.
fn rel_path(group: &GroupFolder, name: &str) -> String {
    format!("groups/{group}/conversations/{name}")
}

/// Renders a parsed transcript and writes its markdown archive into the
/// group's `conversations/` folder. Blocking (file I/O).
#[allow(clippy::too_many_arguments)] // each is a distinct input; a struct would only rename them
pub fn prepare(
    home: &Home,
    store: &Store,
    opts: &archive::ArchiveOptions,
    group: &GroupFolder,
    parsed: transcript::Transcript,
    name: Option<&str>,
    session_id: Option<&str>,
    trigger: Trigger,
) -> Result<Prepared> {
    let session_id = match session_id.or(parsed.session_id.as_deref()) {
        Some(id) => validate::session_id(id).ok(),
        None => None,
    };
    let now: DateTime<Local> = Local::now();
    // Cleaned as the archive is: the title names the file and is indexed.
    let title = archive::title_with(name, &parsed, &now, opts);
    let body = archive::render(&title, &parsed, &now, opts);
    let dir = home.conversations_tree(group)?;
    let stem = archive::stem(&title, &now);
    // A row may still hold a name whose file was deleted by hand; never
    // reuse it (the path column is unique and the old row stays searchable).
    let recorded = |file: &str| {
        store
            .read_blocking(|c| store::archives::is_recorded(c, &rel_path(group, file)))
            .unwrap_or(false)
    };
    let file_name = home.confined(
        group,
        "conversations/",
        archive::write_new(
            &dir,
            &now.format("%Y-%m-%d").to_string(),
            &stem,
            &body,
            &recorded,
        ),
    )?;
    Ok(Prepared {
        group: group.clone(),
        session_id,
        title,
        rel_path: rel_path(group, &file_name),
        file_name,
        body,
        trigger,
        created_at: crate::now_rfc3339(),
        stats: parsed.stats,
    })
}

/// Parses a group's own transcript of `session_id`, read beneath its
/// `.claude` folder without following a link. None when there is none.
pub fn read_transcript(
    home: &Home,
    group: &GroupFolder,
    session_id: &str,
) -> Result<Option<transcript::Transcript>> {
    let id = validate::session_id(session_id)?;
    let tree = home.claude_tree(group)?;
    let rel = Path::new("projects")
        .join(crate::home::PROJECT_DIR)
        .join(format!("{id}.jsonl"));
    match tree.open_file(&rel) {
        Ok(f) => Ok(Some(home.confined(
            group,
            "the transcript",
            transcript::parse_reader(f, transcript::DEFAULT_MAX_LINE),
        )?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        // A link on the way is recorded and the transcript treated as gone:
        // the session is still cleared, with nothing archived.
        Err(e) if g2_core::confined::is_planted(&e) => {
            home.planted(
                group,
                &format!(".claude/{}: a link; not archived", rel.display()),
            );
            Ok(None)
        }
        Err(e) => home.confined(group, "the transcript", Err(e)),
    }
}

/// Archives a transcript on its own (`g2 archive`): prepare, then record in
/// one transaction; the file is removed again if recording fails.
pub async fn archive_transcript(
    home: &Home,
    store: &Store,
    opts: archive::ArchiveOptions,
    group: &GroupFolder,
    transcript_path: PathBuf,
    name: Option<String>,
    trigger: Trigger,
) -> Result<(ArchiveRecord, transcript::Stats)> {
    let (h, group_owned, st) = (home.clone(), group.clone(), store.clone());
    let prepared = tokio::task::spawn_blocking(move || {
        // The operator named this file: it is read as given.
        let parsed = transcript::parse_file(&transcript_path)
            .ctx(|| format!("reading transcript {}", transcript_path.display()))?;
        prepare(
            &h,
            &st,
            &opts,
            &group_owned,
            parsed,
            name.as_deref(),
            None,
            trigger,
        )
    })
    .await??;
    record(home, store, prepared).await
}

/// Records a prepared archive in a transaction of its own; removes the file
/// when that fails.
pub async fn record(
    home: &Home,
    store: &Store,
    prepared: Prepared,
) -> Result<(ArchiveRecord, transcript::Stats)> {
    let stats = prepared.stats.clone();
    let (group, file_name) = (prepared.group.clone(), prepared.file_name.clone());
    match store
        .write(move |tx| store::archives::insert(tx, &prepared))
        .await
    {
        Ok(rec) => Ok((rec, stats)),
        Err(e) => {
            discard(home, &group, &file_name);
            Err(e)
        }
    }
}

/// A recorded archive's markdown, read beneath its group's folder without
/// following a link; None when the file is gone.
pub fn read_markdown(home: &Home, rec: &ArchiveRecord) -> Result<Option<String>> {
    let Some(name) = rec
        .path
        .strip_prefix(&format!("groups/{}/conversations/", rec.group))
    else {
        return Err(Error::Invalid(format!(
            "archive path {:?} is not in its group's conversations/",
            rec.path
        )));
    };
    let dir = home.conversations_tree(&rec.group)?;
    match dir.read(name, 64 << 20) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => home.confined(&rec.group, &rec.path, Err(e)).map(|()| None),
    }
}

/// Fails with a clear error when the transcript is missing, instead of an
/// empty archive.
pub fn require_transcript(path: &Path) -> Result<()> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::NotFound(format!("transcript {}", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-ant-api03-Zx81kQ2vLm4Np7Rt9Wc3Yb6Hd0Fg5JsAe";

    /// `archive.redact_secrets` reaches the file the host writes: its body,
    /// its title and the file's name.
    #[test]
    fn the_written_archive_follows_the_redaction_setting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("groups")).unwrap();
        let home = Home::new(dir.path()).unwrap();
        let store =
            Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
        let group = GroupFolder::new("main").unwrap();
        let jsonl = format!(
            "{}\n{}\n",
            format_args!(
                r#"{{"type":"user","message":{{"content":"deploy with {KEY} <private>4417</private>"}}}}"#
            ),
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Deployed."}]}}"#,
        );
        let write = |redact_secrets: bool| {
            let opts = archive::ArchiveOptions {
                redact_secrets,
                ..archive::ArchiveOptions::default()
            };
            let parsed = transcript::parse_bytes(jsonl.as_bytes());
            let p = prepare(
                &home,
                &store,
                &opts,
                &group,
                parsed,
                None,
                None,
                Trigger::Manual,
            )
            .unwrap();
            let on_disk = std::fs::read_to_string(p.path(&home)).unwrap();
            assert_eq!(on_disk, p.body);
            p
        };

        let p = write(true);
        for text in [&p.body, &p.title, &p.file_name] {
            assert!(!text.contains("sk-ant") && !text.contains("4417"), "{text}");
        }
        assert!(
            p.body
                .contains("**User**: deploy with [redacted:anthropic-key]")
        );

        let p = write(false);
        assert!(p.body.contains(KEY) && p.body.contains("<private>4417</private>"));
        assert!(p.title.contains(KEY), "{}", p.title);
    }
}
