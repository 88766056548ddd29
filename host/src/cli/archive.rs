//! `g2 archive` and `g2 search`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

use super::{Ctx, Output, require_group};
use crate::archives::{self, Trigger};
use crate::search;
use crate::terminal::{inert, inert_name};

pub(super) async fn archive(
    ctx: &Ctx,
    transcript: PathBuf,
    group: &str,
    name: Option<String>,
    out: Output,
) -> Result<i32> {
    let store = ctx.store().await?;
    let group = require_group(&store, group).await?;
    archives::require_transcript(&transcript)?;
    let (rec, stats) = archives::archive_transcript(
        &ctx.home,
        &store,
        ctx.settings
            .archive_options(&crate::gateway::credentials::redactor(
                ctx.home.root(),
                &ctx.settings,
            )),
        &group.folder,
        transcript,
        name,
        Trigger::Manual,
    )
    .await?;
    out.print(&rec, |rec| {
        println!("{}", ctx.home.resolve(&rec.path).display());
        if stats.malformed + stats.oversized > 0 {
            eprintln!(
                "note: skipped {} malformed and {} oversized lines",
                stats.malformed, stats.oversized
            );
        }
        Ok(())
    })?;
    Ok(0)
}

pub(super) async fn search(
    ctx: &Ctx,
    query: String,
    group: Option<String>,
    limit: usize,
    out: Output,
) -> Result<i32> {
    let store = ctx.store().await?;
    if let Some(note) = search::question::cap(&query).note() {
        eprintln!("note: {note}");
    }
    let hits = store
        .read(move |c| search::search(c, &query, group.as_deref(), limit))
        .await?;
    out.print(&hits, |hits| {
        if hits.is_empty() {
            println!("no matches");
            return Ok(());
        }
        let mut w = std::io::stdout().lock();
        for (i, h) in hits.iter().enumerate() {
            writeln!(
                w,
                "{}. [{}] {}  ({})",
                i + 1,
                inert_name(&h.group),
                inert_name(&h.name),
                inert_name(&h.created_at[..10.min(h.created_at.len())])
            )?;
            writeln!(
                w,
                "   {}",
                inert_name(&ctx.home.resolve(&h.path).display().to_string())
            )?;
            writeln!(w, "   {}", inert(&h.snippet))?;
        }
        Ok(())
    })?;
    Ok(0)
}
