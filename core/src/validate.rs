//! Validation of every name that becomes part of a path.
//!
//! Group folders, session ids and archive names arrive from users, agents and
//! IPC payloads. Each is checked here *before* it is joined onto a base
//! directory; [`within`] then checks the joined path again, so a future caller
//! that forgets the first check still cannot leave its base.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest slug produced by [`slug`], in bytes (the archive file name adds a
/// date and maybe a suffix; the whole stays well under file-name limits).
pub const MAX_SLUG_LEN: usize = 60;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ValidationError {
    #[error(
        "invalid group folder {0:?}: use 1-64 characters from A-Z a-z 0-9 _ -, starting with a letter or digit"
    )]
    GroupFolder(String),
    #[error("the group folder name {0:?} is reserved")]
    ReservedFolder(String),
    #[error("invalid session id {0:?}: a session id is a UUID")]
    SessionId(String),
    #[error("path {path} leaves its base directory {base}")]
    Escapes { path: PathBuf, base: PathBuf },
}

/// Folder names that are not groups. `global` holds the memory every
/// non-main group reads.
pub const RESERVED_FOLDERS: &[&str] = &["global"];

/// Checks a group folder name: `^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`, not reserved.
pub fn group_folder(name: &str) -> Result<&str, ValidationError> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-');
    if !ok {
        return Err(ValidationError::GroupFolder(name.to_string()));
    }
    if RESERVED_FOLDERS
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(ValidationError::ReservedFolder(name.to_string()));
    }
    Ok(name)
}

/// A group's folder name, checked once where it comes in (a command-line
/// argument, an HTTP path, an IPC folder, a stored row) and carried as this
/// type from there on: a value of it always passes [`group_folder`], so
/// nothing behind the edge checks again.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GroupFolder(String);

/// Shown as the name it is (`"fam"`), so messages that quote a folder with
/// `{:?}` read the same whatever type carries it.
impl std::fmt::Debug for GroupFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl GroupFolder {
    /// Checks `name` (see [`group_folder`]).
    pub fn new(name: impl Into<String>) -> Result<Self, ValidationError> {
        let name = name.into();
        group_folder(&name)?;
        Ok(GroupFolder(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for GroupFolder {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for GroupFolder {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for GroupFolder {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl AsRef<std::ffi::OsStr> for GroupFolder {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_ref()
    }
}

impl PartialEq<GroupFolder> for str {
    fn eq(&self, other: &GroupFolder) -> bool {
        self == other.0
    }
}

impl PartialEq<GroupFolder> for &str {
    fn eq(&self, other: &GroupFolder) -> bool {
        *self == other.0
    }
}

impl PartialEq<GroupFolder> for String {
    fn eq(&self, other: &GroupFolder) -> bool {
        *self == other.0
    }
}

impl std::borrow::Borrow<str> for GroupFolder {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for GroupFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for GroupFolder {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, ValidationError> {
        GroupFolder::new(s)
    }
}

impl TryFrom<String> for GroupFolder {
    type Error = ValidationError;
    fn try_from(s: String) -> Result<Self, ValidationError> {
        GroupFolder::new(s)
    }
}

impl From<GroupFolder> for String {
    fn from(f: GroupFolder) -> String {
        f.0
    }
}

impl PartialEq<str> for GroupFolder {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for GroupFolder {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for GroupFolder {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// Whose memory a row is: a group's folder, or `global`, the memory every
/// group reads and none owns (only people write to it). Checked like
/// [`GroupFolder`] where it comes in; a value always passes [`any_folder`].
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MemoryFolder(String);

impl std::fmt::Debug for MemoryFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for MemoryFolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl MemoryFolder {
    /// The global memory's folder.
    pub const GLOBAL: &'static str = "global";

    /// Checks `name` (see [`any_folder`]).
    pub fn new(name: impl Into<String>) -> Result<Self, ValidationError> {
        let name = name.into();
        any_folder(&name)?;
        Ok(MemoryFolder(name))
    }

    pub fn global() -> Self {
        MemoryFolder(Self::GLOBAL.to_string())
    }

    pub fn is_global(&self) -> bool {
        self.0 == Self::GLOBAL
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<GroupFolder> for MemoryFolder {
    fn from(g: GroupFolder) -> Self {
        MemoryFolder(g.0)
    }
}

impl From<&GroupFolder> for MemoryFolder {
    fn from(g: &GroupFolder) -> Self {
        MemoryFolder(g.0.clone())
    }
}

impl PartialEq<GroupFolder> for MemoryFolder {
    fn eq(&self, other: &GroupFolder) -> bool {
        self.0 == other.0
    }
}

impl TryFrom<String> for MemoryFolder {
    type Error = ValidationError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        MemoryFolder::new(s)
    }
}

impl From<MemoryFolder> for String {
    fn from(m: MemoryFolder) -> String {
        m.0
    }
}

/// Like [`group_folder`] but also accepts the reserved folders; for code that
/// reads them (the global memory), never for registering a group.
pub fn any_folder(name: &str) -> Result<&str, ValidationError> {
    match group_folder(name) {
        Err(ValidationError::ReservedFolder(_)) | Ok(_) => Ok(name),
        Err(e) => Err(e),
    }
}

/// Checks that a session id is a UUID and returns it in canonical lower-case
/// hyphenated form, the form Claude Code uses for transcript file names.
pub fn session_id(id: &str) -> Result<String, ValidationError> {
    // `Uuid::parse_str` also takes braced, URN and simple forms; only the
    // hyphenated one may reach a path.
    if id.len() != 36 {
        return Err(ValidationError::SessionId(id.to_string()));
    }
    uuid::Uuid::parse_str(id)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| ValidationError::SessionId(id.to_string()))
}

/// Joins `rel` onto `base` and checks, lexically and then through the file
/// system where the path exists, that the result stays under `base`.
pub fn within(base: &Path, rel: &Path) -> Result<PathBuf, ValidationError> {
    let escapes = || ValidationError::Escapes {
        path: base.join(rel),
        base: base.to_path_buf(),
    };
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(escapes());
    }
    let joined = base.join(rel);
    // A symlink inside base may still point outside it.
    if let (Ok(real_base), Ok(real)) = (base.canonicalize(), joined.canonicalize())
        && !real.starts_with(&real_base)
    {
        return Err(escapes());
    }
    Ok(joined)
}

/// Turns a free-form name into a file-name slug: ASCII transliteration,
/// lower case, runs of anything else folded to one `-`, at most
/// [`MAX_SLUG_LEN`] bytes. May return an empty string.
pub fn slug(name: &str) -> String {
    let ascii = deunicode::deunicode(name);
    let mut out = String::with_capacity(ascii.len().min(MAX_SLUG_LEN));
    let mut dash = false;
    for c in ascii.chars() {
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            if out.len() >= MAX_SLUG_LEN {
                break;
            }
            out.push(c.to_ascii_lowercase());
        } else {
            dash = true;
        }
    }
    if out.len() > MAX_SLUG_LEN {
        out.truncate(MAX_SLUG_LEN);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders() {
        for ok in ["main", "a", "Dev-Team_2", &"x".repeat(64)] {
            assert_eq!(group_folder(ok), Ok(ok));
        }
        for bad in [
            "",
            "-a",
            "_a",
            "a/b",
            "..",
            "../main",
            "a b",
            "é",
            "a\0",
            ".hidden",
            &"x".repeat(65),
            "main/",
            "a\\b",
        ] {
            assert!(
                matches!(group_folder(bad), Err(ValidationError::GroupFolder(_))),
                "{bad:?} accepted"
            );
        }
        assert_eq!(
            group_folder("global"),
            Err(ValidationError::ReservedFolder("global".into()))
        );
        assert!(group_folder("GLOBAL").is_err());
        assert_eq!(any_folder("global"), Ok("global"));
        assert!(any_folder("../global").is_err());
    }

    #[test]
    fn session_ids() {
        let id = "D58A79A7-451E-4AF5-86D1-3E839200D98D";
        assert_eq!(
            session_id(id).unwrap(),
            "d58a79a7-451e-4af5-86d1-3e839200d98d"
        );
        for bad in [
            "",
            "../../etc/passwd",
            "d58a79a7451e4af586d13e839200d98d",
            "{d58a79a7-451e-4af5-86d1-3e839200d98d}",
            "d58a79a7-451e-4af5-86d1-3e839200d98g",
            "d58a79a7-451e-4af5-86d1-3e839200d9/.",
        ] {
            assert!(session_id(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn within_refuses_traversal() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        assert!(within(base, Path::new("a/b.md")).is_ok());
        for bad in ["../x", "a/../../x", "/etc/passwd", "a/../.."] {
            assert!(within(base, Path::new(bad)).is_err(), "{bad:?} accepted");
        }
        std::os::unix::fs::symlink("/", base.join("link")).unwrap();
        assert!(within(base, Path::new("link/etc")).is_err());
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("Tax research"), "tax-research");
        assert_eq!(slug("  Café déjà vu!! "), "cafe-deja-vu");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本"), "ri-ben");
        assert_eq!(slug("!!!"), "");
        let long = slug(&"word ".repeat(40));
        assert!(long.len() <= MAX_SLUG_LEN && !long.ends_with('-'), "{long}");
    }

    #[test]
    fn a_group_folder_is_checked_once_and_carried() {
        let f: GroupFolder = "fam-1".parse().unwrap();
        assert_eq!(f, "fam-1");
        assert_eq!(f.to_string(), "fam-1");
        assert_eq!(format!("{f:?}"), "\"fam-1\"");
        for bad in ["", "../x", "global", "a b", "-x"] {
            assert!(GroupFolder::new(bad).is_err(), "{bad:?}");
        }
        // Deserializing checks too: a stored or sent name is never trusted.
        let ok: GroupFolder = serde_json::from_str("\"fam\"").unwrap();
        assert_eq!(ok.as_str(), "fam");
        assert!(serde_json::from_str::<GroupFolder>("\"../etc\"").is_err());
        assert_eq!(serde_json::to_string(&ok).unwrap(), "\"fam\"");
    }
}
