//! What the main group's agent sees of the home at `/workspace/project`:
//! the home as it is when the container starts, read-only, without
//! anything that holds a credential.
//!
//! The home itself is never mounted. `/workspace/project` is an empty
//! read-only tmpfs, and each top-level entry of the home that may be seen
//! is bound into it on its own, read-only. What is left out is left out
//! whether or not it exists when the container starts, so a file made
//! later (an `.env` written while main's agent runs, a `g2.toml` saved
//! with a token) is not in the container either; and since nothing is
//! bound over a secret, a file renamed over it (an editor's save) cannot
//! drop a mask. Left out:
//! - `data/` (the database, every group's IPC folder and session state);
//! - `g2.toml`, and the settings file in use when it is in the home (its
//!   top-level folder, when it is deeper);
//! - `.env` and every `.env*`;
//! - names that hold a credential's variable (`telegram_bot_token.txt`,
//!   `ANTHROPIC_API_KEY`), from the one registry of them
//!   (`gateway::credentials::secret_variables`);
//! - names the mount allowlist always blocks ([`ALWAYS_BLOCKED`]:
//!   `.ssh`, `.aws`, `credentials`, …);
//! - links, sockets and other non-files, and names that are not UTF-8.
//!
//! An entry made at the top of the home after the container started shows
//! at its next start.

use std::path::Path;

use super::{ALWAYS_BLOCKED, Mount};
use crate::home::Home;
use g2_core::wire::PROJECT_DIR;

/// The tmpfs `/workspace/project` is (it holds only mount points).
const VIEW_OPTIONS: &str = "ro,nosuid,nodev,noexec,size=64k,mode=0755";

/// Whether the top-level entry `name` of the home stays out of main's view.
pub fn hidden(name: &str, home: &Home) -> bool {
    let lower = name.to_ascii_lowercase();
    name == "data"
        || name == crate::config::CONFIG_FILE
        || lower.starts_with(".env")
        || crate::gateway::credentials::secret_variables()
            .iter()
            .any(|v| lower.contains(&v.to_ascii_lowercase()))
        || home.settings_file_top().is_some_and(|top| top == name)
        || ALWAYS_BLOCKED
            .iter()
            .any(|b| lower.contains(&b.to_ascii_lowercase()))
}

/// The mounts of main's view of `root` (the home, or the project root the
/// caller names).
pub fn view(home: &Home, root: &Path) -> Vec<Mount> {
    let mut out = vec![Mount::Tmpfs {
        container: PROJECT_DIR.into(),
        options: VIEW_OPTIONS.into(),
    }];
    let Ok(entries) = std::fs::read_dir(root) else {
        tracing::warn!(root = %root.display(), "the home could not be listed; main sees none of it");
        return out;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() || t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !hidden(n, home))
        .collect();
    names.sort();
    out.extend(names.into_iter().map(|n| Mount::Bind {
        host: root.join(&n),
        container: format!("{PROJECT_DIR}/{n}"),
        read_only: true,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_whether_or_not_they_exist() {
        let d = tempfile::tempdir().unwrap();
        let home = Home::new(d.path()).unwrap();
        home.ensure_layout().unwrap();
        for f in [
            "g2.toml",
            ".env",
            ".env.local",
            "README.md",
            "credentials.json",
        ] {
            std::fs::write(d.path().join(f), "x").unwrap();
        }
        for dir in [".ssh", "docs", ".AWS"] {
            std::fs::create_dir(d.path().join(dir)).unwrap();
        }
        std::os::unix::fs::symlink("/etc", d.path().join("etc-link")).unwrap();
        std::fs::write(d.path().join(odd_name()), "x").unwrap();
        let seen: Vec<String> = view(&home, d.path())
            .into_iter()
            .map(|m| match m {
                Mount::Bind {
                    container,
                    read_only,
                    ..
                } => {
                    assert!(read_only, "{container}");
                    container
                }
                Mount::Tmpfs { container, options } => {
                    assert!(options.starts_with("ro,"));
                    container
                }
            })
            .collect();
        assert_eq!(
            seen,
            [
                "/workspace/project",
                "/workspace/project/README.md",
                "/workspace/project/docs",
                "/workspace/project/groups"
            ]
        );
        // Names alone decide: a secret that does not exist yet is hidden too.
        for n in [
            "data",
            "g2.toml",
            ".env",
            ".env.production",
            ".netrc",
            "id_rsa",
            "telegram_bot_token.txt",
            "ANTHROPIC_API_KEY",
            "slack_app_token",
        ] {
            assert!(hidden(n, &home), "{n}");
        }
        for n in ["groups", "docs", "README.md", "Cargo.toml", "SECURITY.md"] {
            assert!(!hidden(n, &home), "{n}");
        }
        // The settings file in use, wherever in the home it is.
        let custom = Home::new(d.path())
            .unwrap()
            .with_settings_file(d.path().join("conf/host.toml"));
        assert!(hidden("conf", &custom));
        assert!(!hidden("conf", &home));
    }

    /// A name with a byte that is not UTF-8 (it is left out).
    fn odd_name() -> &'static std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        std::ffi::OsStr::from_bytes(b"odd-\xff")
    }
}
