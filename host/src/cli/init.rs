//! `g2 init`: the folders, the database, and the main and global groups.

use anyhow::Result;

use super::Ctx;
use crate::groups::{self, NewGroup};
use crate::store;

/// The settings file `g2 init` writes when there is none: every line a
/// comment, so the defaults hold until the operator changes one.
const SETTINGS_TEMPLATE: &str = "\
# g2's settings (docs/configuration.md). Every key is optional;
# G2_* environment variables override this file.
# This file may hold the API token: keep it readable by its owner only
# (mode 600; `g2 doctor` fails otherwise). Model keys and bot tokens go in
# .env or the environment, never here.

# assistant_name = \"G2\"

# [api]
# listen = \"127.0.0.1:4170\"
# token = \"…\"            # 16+ characters; required to listen beyond loopback

# [container]
# disk_mb = 2048
# max_group_files = 200000
";

pub(super) async fn init(ctx: &Ctx) -> Result<i32> {
    ctx.home.ensure_layout()?;
    let settings_file = ctx.home.settings_file();
    // It may come to hold the API token: its owner's only.
    let settings_written = crate::home::write_if_missing(&settings_file, SETTINGS_TEMPLATE, 0o600)?;
    let store = ctx.store().await?;
    let (main, registered) = main_group(ctx, &store).await?;
    println!("home      {}", ctx.home.root().display());
    println!("database  {}", ctx.home.store_name(&ctx.settings.store.url));
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
    println!(
        "settings  {} ({})",
        settings_file.display(),
        if settings_written {
            "written, mode 600"
        } else {
            "already there"
        }
    );
    if let Some(problem) = crate::gateway::credentials::exposed(&ctx.home, &ctx.settings)
        .into_iter()
        .next()
    {
        eprintln!("warning: {problem}");
    }
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
