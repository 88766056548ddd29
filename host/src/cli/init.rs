//! `g2 init`: the folders, the database, and the main and global groups.

use anyhow::Result;

use super::Ctx;
use crate::groups::{self, NewGroup};
use crate::store;

pub(super) async fn init(ctx: &Ctx) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let store = ctx.store().await?;
    let (main, registered) = main_group(ctx, &store).await?;
    println!("home      {}", ctx.home.root().display());
    println!("database  {}", ctx.home.db_path().display());
    println!(
        "main      groups/{}/ ({})",
        main.folder,
        if registered {
            "registered"
        } else {
            "already registered"
        }
    );
    println!("global    groups/global/CLAUDE.md");
    Ok(0)
}

/// The main group with its folder in place, and whether it was registered
/// now: a home has one, named `main` unless another was registered first.
async fn main_group(ctx: &Ctx, store: &store::Store) -> Result<(groups::Group, bool)> {
    let existing = || store.read(store::groups::main_group);
    if let Some(main) = existing().await? {
        ctx.home.ensure_group(&main.folder, &main.name, true)?;
        return Ok((main, false));
    }
    let new = NewGroup {
        folder: "main".into(),
        name: "Main".into(),
        is_main: true,
        ..Default::default()
    };
    match groups::register(store, &ctx.home, new, &ctx.settings.assistant_name).await {
        Ok(main) => Ok((main, true)),
        // Registered by another init meanwhile.
        Err(crate::Error::Conflict(e)) => match existing().await? {
            Some(main) => {
                ctx.home.ensure_group(&main.folder, &main.name, true)?;
                Ok((main, false))
            }
            None => Err(crate::Error::Conflict(e).into()),
        },
        Err(e) => Err(e.into()),
    }
}
