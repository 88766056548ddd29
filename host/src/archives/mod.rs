//! Conversation archives: transcripts turned into markdown files under
//! `groups/{folder}/conversations/`, recorded in `conversation_archives` and
//! indexed for full-text search.
//!
//! Writing is three steps, so that a crash at any point leaves either a
//! recorded archive or no file (never a file the database does not know,
//! nor a row without its file):
//! 1. [`prepare`] parses and renders the transcript and writes the file
//!    durably under the *pending* form of a free name
//!    (`.{name}.pending`, `g2_core::confined::Dir::write_pending`);
//! 2. `store::archives::insert` records and indexes it under its name inside
//!    the caller's transaction, which may carry other writes (the session
//!    pointer and history, for a clear); if that fails, the caller removes
//!    the pending file ([`ArchiveFile::discard`]);
//! 3. once it committed, [`ArchiveFile::settle`] gives the file its name.
//!
//! A host killed between them leaves a pending file: at the next start
//! [`reconcile`] settles it when its record committed and removes it when
//! not.

use std::path::{Path, PathBuf};

use chrono::Utc;

use g2_core::{archive, confined, transcript, validate};

use crate::error::IoContext;
use crate::home::Home;
use crate::store::{self, Store};
use crate::{Error, Result};
use g2_core::validate::GroupFolder;

pub use crate::store::archives::{ArchiveRecord, Trigger};

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
    /// The file waits under its pending name until settled (the host wrote
    /// it); an adopted one is the agent's, named already.
    pub pending: bool,
}

/// An archive file whose record is being committed: where it is until then.
#[derive(Debug, Clone)]
pub struct ArchiveFile {
    pub group: GroupFolder,
    pub name: String,
    pub pending: bool,
}

impl ArchiveFile {
    /// Removes it again: its record did not commit, and the folder never
    /// holds an archive the database does not know.
    pub fn discard(&self, home: &Home) {
        if let Ok(dir) = home.conversations_tree(&self.group) {
            let _ = dir.remove(&self.on_disk());
        }
    }

    fn on_disk(&self) -> String {
        if self.pending {
            confined::pending_name(&self.name)
        } else {
            self.name.clone()
        }
    }

    /// Gives a pending file its name once its record committed. When the
    /// agent took the name meanwhile, the file gets the next free one and
    /// `record` follows it (in the database too). Blocking.
    pub fn settle(&self, home: &Home, store: &Store, record: &mut ArchiveRecord) -> Result<()> {
        fail::fail_point!("archive-recorded");
        if !self.pending {
            return Ok(());
        }
        let dir = home.conversations_tree(&self.group)?;
        let what = "conversations/";
        if home.confined(&self.group, what, dir.settle(&self.name))? {
            return Ok(());
        }
        let base = self.name.trim_end_matches(".md");
        for n in 2..10_000 {
            let other = format!("{base}-{n}.md");
            if home.confined(&self.group, what, dir.settle_as(&self.name, &other))? {
                let (id, path) = (record.id, rel_path(&self.group, &other));
                record.path = path.clone();
                return store.write_blocking(|tx| store::archives::move_to(tx, id, &path));
            }
        }
        Err(Error::Conflict(format!(
            "archive {} of group {}: no free name to settle it under",
            self.name, self.group
        )))
    }
}

/// What a host killed between writing an archive and naming it left in a
/// group's `conversations/`: a pending file whose record committed takes
/// its name, any other (and a temp file of one) is removed. Returns how
/// many were settled. Run by the home's lock holder at start. Blocking.
pub fn reconcile(home: &Home, store: &Store, group: &GroupFolder) -> Result<usize> {
    let dir = home.conversations_tree(group)?;
    let entries = home.confined(group, "conversations/", dir.entries())?;
    let mut settled = 0;
    for e in entries.iter().filter(|e| e.kind == confined::Kind::File) {
        match confined::leftover(&e.name) {
            Some(confined::Leftover::Pending(name)) => {
                let path = rel_path(group, name);
                let record = store.read_blocking(|c| store::archives::by_path(c, &path))?;
                match record {
                    Some(mut rec) => {
                        let file = ArchiveFile {
                            group: group.clone(),
                            name: name.to_string(),
                            pending: true,
                        };
                        file.settle(home, store, &mut rec)?;
                        tracing::warn!(group = %group, archive = %rec.path, "an archive recorded before a crash takes its name");
                        settled += 1;
                    }
                    None => {
                        let _ = dir.remove(&e.name);
                        tracing::warn!(group = %group, file = %e.name, "an archive a crash left unrecorded is removed");
                    }
                }
            }
            Some(confined::Leftover::Temp) => {
                let _ = dir.remove(&e.name);
            }
            None => {}
        }
    }
    Ok(settled)
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
            pending: false,
        })
    }

    /// Its file, to remove or settle after the record's transaction.
    pub fn file(&self) -> ArchiveFile {
        ArchiveFile {
            group: self.group.clone(),
            name: self.file_name.clone(),
            pending: self.pending,
        }
    }

    /// The file's absolute path, for people.
    pub fn path(&self, home: &Home) -> PathBuf {
        home.resolve(&self.rel_path)
    }
}

impl<'a> From<&'a Prepared> for store::archives::NewArchive<'a> {
    /// The row its record is: what `store::archives::insert` takes.
    fn from(p: &'a Prepared) -> Self {
        store::archives::NewArchive {
            group: &p.group,
            session_id: p.session_id.as_deref(),
            title: &p.title,
            rel_path: &p.rel_path,
            body: &p.body,
            trigger: p.trigger,
            created_at: &p.created_at,
        }
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
    let now = Utc::now().with_timezone(&crate::zone::of(group.as_str()));
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
        archive::write_pending(
            &dir,
            &now.format("%Y-%m-%d").to_string(),
            &stem,
            &body,
            &recorded,
        ),
    )?;
    fail::fail_point!("archive-pending");
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
        pending: true,
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
        Err(e) if confined::is_planted(&e) => {
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

/// Records a prepared archive in a transaction of its own, then settles
/// its file; removes the file when recording fails.
pub async fn record(
    home: &Home,
    store: &Store,
    prepared: Prepared,
) -> Result<(ArchiveRecord, transcript::Stats)> {
    let stats = prepared.stats.clone();
    let file = prepared.file();
    match store
        .write(move |tx| store::archives::insert(tx, &prepared))
        .await
    {
        Ok(rec) => Ok((settled(home, store, file, rec).await?, stats)),
        Err(e) => {
            file.discard(home);
            Err(e)
        }
    }
}

/// [`ArchiveFile::settle`] on the blocking pool; the record as it is now.
pub async fn settled(
    home: &Home,
    store: &Store,
    file: ArchiveFile,
    mut record: ArchiveRecord,
) -> Result<ArchiveRecord> {
    let (home, store) = (home.clone(), store.clone());
    tokio::task::spawn_blocking(move || {
        file.settle(&home, &store, &mut record)?;
        Ok(record)
    })
    .await?
}

/// A group's (or `global`'s) recorded archives, newest first.
pub async fn list(store: &Store, folder: &str) -> Result<Vec<ArchiveRecord>> {
    let folder = folder.to_string();
    store.read(move |c| store::archives::list(c, &folder)).await
}

/// A recorded archive by id, or `NotFound`.
pub async fn find(store: &Store, id: i64) -> Result<ArchiveRecord> {
    store
        .read(move |c| store::archives::get(c, id))
        .await?
        .ok_or_else(|| Error::NotFound(format!("archive {id}")))
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
            // Written, waiting for its record under the pending name.
            let pending = p
                .path(&home)
                .with_file_name(confined::pending_name(&p.file_name));
            assert_eq!(std::fs::read_to_string(pending).unwrap(), p.body);
            assert!(!p.path(&home).exists());
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

    /// A home with its layout and database, and the group `main`.
    fn fixture() -> (tempfile::TempDir, Home, Store, GroupFolder) {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path()).unwrap();
        home.ensure_layout().unwrap();
        let store =
            Store::open(&dir.path().join("g2.db"), std::time::Duration::from_secs(5)).unwrap();
        (dir, home, store, GroupFolder::new("main").unwrap())
    }

    /// A crash before the record committed leaves a pending file that the
    /// next start removes; after it, one that takes its name. The agent's
    /// own files stay.
    #[test]
    fn what_a_crash_left_is_settled_or_removed() {
        let (_dir, home, store, group) = fixture();
        let jsonl = r#"{"type":"user","message":{"content":"plan the trip"}}"#;
        let opts = archive::ArchiveOptions::default();
        let prepared = |name: &str| {
            prepare(
                &home,
                &store,
                &opts,
                &group,
                transcript::parse_bytes(jsonl.as_bytes()),
                Some(name),
                None,
                Trigger::Manual,
            )
            .unwrap()
        };
        // Killed before its record: nothing recorded, the file goes.
        let lost = prepared("Lost");
        // Killed after its record, before its name.
        let kept = prepared("Kept");
        let rec = store
            .write_blocking(|tx| store::archives::insert(tx, &kept))
            .unwrap();
        let folder = home.conversations_dir(&group).unwrap();
        std::fs::write(folder.join("agents-own.md"), "mine").unwrap();
        std::fs::write(folder.join(".pending.0123456789ab.tmp"), "half").unwrap();
        assert_eq!(reconcile(&home, &store, &group).unwrap(), 1);
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [kept.file_name.as_str(), "agents-own.md"]);
        assert!(!names.contains(&lost.file_name));
        assert_eq!(rec.path, kept.rel_path);
        assert_eq!(
            read_markdown(&home, &rec).unwrap().as_deref(),
            Some(kept.body.as_str())
        );
        // A second start finds nothing to do.
        assert_eq!(reconcile(&home, &store, &group).unwrap(), 0);
    }

    /// When the agent took the name meanwhile, the archive takes the next
    /// free one and its record follows.
    #[test]
    fn a_name_taken_meanwhile_moves_the_record() {
        let (_dir, home, store, group) = fixture();
        let p = prepare(
            &home,
            &store,
            &archive::ArchiveOptions::default(),
            &group,
            transcript::parse_bytes(br#"{"type":"user","message":{"content":"hi"}}"#),
            Some("Taken"),
            None,
            Trigger::Manual,
        )
        .unwrap();
        std::fs::write(p.path(&home), "the agent's").unwrap();
        let mut rec = store
            .write_blocking(|tx| store::archives::insert(tx, &p))
            .unwrap();
        p.file().settle(&home, &store, &mut rec).unwrap();
        assert_eq!(rec.path, p.rel_path.replace(".md", "-2.md"));
        assert_eq!(
            store
                .read_blocking(|c| store::archives::get(c, rec.id))
                .unwrap()
                .unwrap()
                .path,
            rec.path
        );
        assert_eq!(
            std::fs::read_to_string(p.path(&home)).unwrap(),
            "the agent's"
        );
        assert_eq!(read_markdown(&home, &rec).unwrap().unwrap(), p.body);
    }
}
