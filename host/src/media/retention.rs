//! `media.retention_days`: media files older than that are deleted, a
//! day's folder (`media/{date}/`) at a time, once an hour. The messages
//! keep their text and transcripts; their attachments then name a file
//! that is gone, as the viewer shows.

use std::time::Duration;

use chrono::{NaiveDate, Utc};
use g2_core::confined::Kind;
use g2_core::validate::GroupFolder;

use super::keep::MEDIA_DIR;
use crate::background::Background;
use crate::home::Home;
use crate::store::{self, Store};

const EVERY: Duration = Duration::from_secs(60 * 60);

/// Deletes the day folders of `folder`'s media dated before `cutoff`;
/// how many files went. Nothing but files in day-named folders is
/// touched (a link is removed as a link, never followed).
pub fn sweep(home: &Home, folder: &GroupFolder, cutoff: NaiveDate) -> crate::Result<usize> {
    let group = home.group_tree(folder)?;
    let media = match group.open_dir(MEDIA_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return home.confined(folder, "the media folder", Err(e)),
    };
    let mut removed = 0;
    for day in home.confined(folder, "the media folder", media.entries())? {
        let old = NaiveDate::parse_from_str(&day.name, "%Y-%m-%d").is_ok_and(|d| d < cutoff);
        if !old || day.kind != Kind::Dir {
            continue;
        }
        let dir = home.confined(folder, "a media day", media.open_dir(&day.name))?;
        for f in home.confined(folder, "a media day", dir.entries())? {
            if f.kind != Kind::Dir && dir.remove(&f.name).is_ok() {
                removed += 1;
            }
        }
        // Left when something else was put there.
        let _ = media.remove_dir(&day.name);
    }
    Ok(removed)
}

/// Sweeps every group now and then hourly, keeping `days` days.
pub fn start(home: Home, store: Store, days: u32) -> Background {
    Background::spawn(|mut stopped| async move {
        loop {
            let cutoff = Utc::now().date_naive() - chrono::Days::new(u64::from(days));
            match store.read(store::groups::list).await {
                Ok(groups) => {
                    let home = home.clone();
                    let swept = tokio::task::spawn_blocking(move || {
                        groups
                            .iter()
                            .map(|g| sweep(&home, &g.folder, cutoff).unwrap_or(0))
                            .sum::<usize>()
                    })
                    .await
                    .unwrap_or(0);
                    if swept > 0 {
                        tracing::info!(
                            files = swept,
                            days,
                            "media: deleted files past media.retention_days"
                        );
                    }
                }
                Err(e) => tracing::warn!(error = %e, "media retention: listing groups"),
            }
            tokio::select! {
                _ = &mut stopped => break,
                () = tokio::time::sleep(EVERY) => {}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_days_go_and_new_ones_and_strangers_stay() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path()).unwrap();
        let folder = GroupFolder::new("fam".to_string()).unwrap();
        let media = dir.path().join("groups/fam/media");
        for day in ["2026-01-01", "2026-03-01", "notes"] {
            std::fs::create_dir_all(media.join(day)).unwrap();
            std::fs::write(media.join(day).join("a1-x.ogg"), b"x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", media.join("2025-01-01")).unwrap();
        let n = sweep(&home, &folder, NaiveDate::from_ymd_opt(2026, 2, 1).unwrap()).unwrap();
        assert_eq!(n, 1);
        assert!(!media.join("2026-01-01").exists());
        assert!(media.join("2026-03-01/a1-x.ogg").exists());
        assert!(media.join("notes/a1-x.ogg").exists());
        assert!(
            std::fs::symlink_metadata(media.join("2025-01-01")).is_ok(),
            "a link is left alone"
        );
        assert!(std::path::Path::new("/etc/passwd").exists());
        // No media folder: nothing to do.
        let other = GroupFolder::new("other".to_string()).unwrap();
        assert_eq!(
            sweep(&home, &other, NaiveDate::from_ymd_opt(2026, 2, 1).unwrap()).unwrap(),
            0
        );
    }
}
