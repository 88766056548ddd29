//! `g2 init`: the folders, the database, and the main and global groups.

use anyhow::Result;

use super::Ctx;
use crate::groups::{self, NewGroup};

pub(super) async fn init(ctx: &Ctx) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let main = NewGroup {
        folder: "main".into(),
        name: "Main".into(),
        is_main: true,
        ..Default::default()
    }
    .into_group(&ctx.settings.assistant_name)?;
    let created = store
        .write(move |tx| match groups::main_group(tx)? {
            Some(existing) => Ok((existing, false)),
            None => {
                groups::add(tx, &main)?;
                Ok((main, true))
            }
        })
        .await?;
    ctx.home
        .ensure_group(&created.0.folder, &created.0.name, true)?;
    println!("home      {}", ctx.home.root().display());
    println!("database  {}", ctx.home.db_path().display());
    println!(
        "main      groups/{}/ ({})",
        created.0.folder,
        if created.1 {
            "registered"
        } else {
            "already registered"
        }
    );
    println!("global    groups/global/CLAUDE.md");
    Ok(0)
}
