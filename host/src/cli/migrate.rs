//! `g2 migrate --to postgres://…`: copies this home's SQLite store into an
//! empty PostgreSQL database (`store::copy`), with a progress bar, and
//! checks every table's count. The SQLite file is only read; the home keeps
//! using it until `store.url` names the new database.

use std::io::Write;

use anyhow::{Result, bail};

use super::{Ctx, Output};
use crate::lock::HostLock;
use crate::store::{self, Backend, Store};

pub(super) async fn migrate(ctx: &Ctx, to: String, out: Output) -> Result<i32> {
    let Some(source) = Backend::of(&ctx.settings.store.url)?.sqlite_file(&ctx.home.db_path())
    else {
        bail!("this home's store is PostgreSQL already (store.url)");
    };
    if Backend::of(&to)? != Backend::Postgres {
        bail!("--to takes a postgres:// URL");
    }
    // No g2 serve (or other command) changes the store while it is copied.
    let _lock = HostLock::acquire(&ctx.home, "migrate")?;
    let timeout = std::time::Duration::from_millis(ctx.settings.store.busy_timeout_ms);
    let name = target_name(&to);
    let target = {
        let to = to.clone();
        tokio::task::spawn_blocking(move || Store::open_postgres(&to, timeout)).await??
    };
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>22} {bar:40} {pos}/{len}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if out.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let b = bar.clone();
    let counts = tokio::task::spawn_blocking(move || {
        store::copy::sqlite_to_postgres(&source, &target, |p| {
            if b.message() != p.table {
                b.set_message(p.table.to_string());
                b.set_length(p.total);
            }
            b.set_position(p.done);
        })
    })
    .await??;
    bar.finish_and_clear();
    out.print(&counts, |counts| {
        let mut w = std::io::stdout().lock();
        for c in counts.iter().filter(|c| c.source > 0) {
            writeln!(w, "{:<22} {:>9}", c.table, c.target)?;
        }
        let rows: i64 = counts.iter().map(|c| c.target).sum();
        writeln!(
            w,
            "copied {rows} rows into {name}; every table's count matches"
        )?;
        writeln!(
            w,
            "the SQLite store is untouched; to use the copy, set in g2.toml:"
        )?;
        writeln!(
            w,
            "  [store]\n  url = \"{name}\"   # the password from PGPASSWORD"
        )?;
        Ok(())
    })?;
    Ok(0)
}

/// The URL without its password.
fn target_name(url: &str) -> String {
    crate::backup::settings::without_password(url).unwrap_or_else(|| url.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_password_is_left_out() {
        assert_eq!(
            super::target_name("postgres://g2:s3cret@db:5432/g2"),
            "postgres://g2@db:5432/g2"
        );
        assert_eq!(super::target_name("postgres://db/g2"), "postgres://db/g2");
    }
}
