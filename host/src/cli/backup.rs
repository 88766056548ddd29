//! `g2 backup FILE` and `g2 restore FILE` (`crate::backup`,
//! docs/backup.md): what was written or restored, counted; with a
//! PostgreSQL store, the `pg_dump` / `pg_restore` command that goes with
//! the files.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use super::{Ctx, Output};
use crate::backup::{self, Manifest};
use crate::store::Backend;

pub(super) async fn backup(ctx: &Ctx, file: PathBuf, out: Output) -> Result<i32> {
    let url = ctx.settings.store.url.clone();
    let db = Backend::of(&url)?
        .sqlite_file(&ctx.home.db_path())
        .map(|p| ctx.home.resolve(p));
    let home = ctx.home.clone();
    let settings = ctx.home.settings_file();
    let timeout = Duration::from_millis(ctx.settings.store.busy_timeout_ms);
    let written = tokio::task::spawn_blocking(move || {
        backup::backup(&home, db.as_deref(), &settings, &file, timeout)
    })
    .await??;
    let dump = backup::settings::without_password(&url).unwrap_or(url);
    out.print(&written, |w| {
        let mut o = std::io::stdout().lock();
        writeln!(
            o,
            "wrote {} ({})",
            w.file.display(),
            size(w.bytes)
        )?;
        summary(&mut o, &w.manifest)?;
        if w.manifest.database.is_none() {
            writeln!(
                o,
                "the PostgreSQL database is not in this file; dump it beside it:\n  pg_dump --format=custom --file {}.pgdump '{dump}'",
                w.file.display()
            )?;
        }
        Ok(())
    })?;
    Ok(0)
}

pub(super) async fn restore(ctx: &Ctx, file: PathBuf, out: Output) -> Result<i32> {
    let home = ctx.home.clone();
    let restored = tokio::task::spawn_blocking(move || backup::restore(&home, &file)).await??;
    out.print(&restored, |r| {
        let mut o = std::io::stdout().lock();
        writeln!(o, "restored into {}", r.home.display())?;
        summary(&mut o, &r.manifest)?;
        if r.manifest.database.is_some() {
            writeln!(o, "every table's rows match the backup's manifest")?;
        } else {
            writeln!(
                o,
                "the PostgreSQL database is not in the backup: load its dump into an empty database first:\n  pg_restore --dbname 'postgres://user@host:port/database' FILE.pgdump"
            )?;
        }
        if r.manifest.settings_removed.as_ref().is_some_and(|s| !s.is_empty()) {
            writeln!(o, "set again what was taken out of g2.toml, then start it: g2 serve")?;
        } else {
            writeln!(o, "start it: g2 serve")?;
        }
        Ok(())
    })?;
    Ok(0)
}

/// The manifest's counts, for people.
fn summary(o: &mut impl Write, m: &Manifest) -> std::io::Result<()> {
    if let Some(db) = &m.database {
        let n = |t: &str| db.rows.get(t).copied().unwrap_or(0);
        writeln!(
            o,
            "  store (schema {}): {} messages, {} sessions (+{} in history), {} archives, {} prompts, {} tool calls, {} observations",
            db.schema_version,
            n("messages"),
            n("sessions"),
            n("session_history"),
            n("conversation_archives"),
            n("prompt_batches"),
            n("activities"),
            n("observations"),
        )?;
    }
    writeln!(
        o,
        "  files: {} ({}) from groups/ and data/sessions/",
        m.files,
        size(m.file_bytes)
    )?;
    match &m.settings_removed {
        None => writeln!(o, "  g2.toml: none")?,
        Some(r) if r.is_empty() => writeln!(o, "  g2.toml: as it is (no secrets in it)")?,
        Some(r) => writeln!(o, "  g2.toml: taken out: {}", r.join(", "))?,
    }
    writeln!(
        o,
        "  not in a backup: .env (keys and tokens), tools/ (models), the agent image"
    )?;
    if !m.archives_missing.is_empty() {
        writeln!(
            o,
            "  warning: {} recorded archive(s) had no file: {}",
            m.archives_missing.len(),
            m.archives_missing.join(", ")
        )?;
    }
    Ok(())
}

#[allow(clippy::cast_precision_loss)]
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}
