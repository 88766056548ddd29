//! `g2 sessions`: a group's active session and its history.

use anyhow::Result;
use clap::Subcommand;

use g2_core::validate::GroupFolder;

use super::live::{self, Route};
use super::{Ctx, Output, require_group};
use crate::terminal::inert_name;

#[derive(Subcommand)]
pub(super) enum SessionsCmd {
    /// The group's active session.
    Show {
        folder: String,
        #[command(flatten)]
        out: Output,
    },
    /// Make a session the group's active one.
    Set { folder: String, session_id: String },
    /// Earlier sessions of the group, newest first.
    History {
        folder: String,
        #[command(flatten)]
        out: Output,
    },
    /// Archive the active session's transcript, bookmark it, remove the pointer.
    Clear {
        folder: String,
        #[arg(long)]
        name: String,
        #[command(flatten)]
        out: Output,
    },
    /// Make an earlier session active again.
    Resume {
        folder: String,
        history_id: i64,
        /// Bookmark (and archive) the active session under this name first.
        #[arg(long)]
        save_as: Option<String>,
        #[command(flatten)]
        out: Output,
    },
}

impl SessionsCmd {
    fn folder(&self) -> &str {
        match self {
            SessionsCmd::Show { folder, .. }
            | SessionsCmd::Set { folder, .. }
            | SessionsCmd::History { folder, .. }
            | SessionsCmd::Clear { folder, .. }
            | SessionsCmd::Resume { folder, .. } => folder,
        }
    }
}

pub(super) async fn run(ctx: &Ctx, cmd: SessionsCmd) -> Result<i32> {
    // The argument is checked here, where it comes in, before any store.
    let folder = GroupFolder::new(cmd.folder())?;
    let store = ctx.store().await?;
    let sessions = ctx.sessions(&store);
    match cmd {
        SessionsCmd::Show { folder: _, out } => {
            let p = sessions.get(&folder).await?;
            out.print(&p, |p| {
                match &p.session_id {
                    Some(id) => println!("{id}"),
                    None => println!("no active session (generation {})", p.generation),
                }
                Ok(())
            })?;
        }
        SessionsCmd::Set {
            folder: _,
            session_id,
        } => {
            require_group(&store, &folder).await?;
            // No host may be running the group meanwhile: its agent would
            // go on in the session this replaces.
            let Route::Here(_lock) = live::route(ctx, &store, "sessions").await? else {
                return Err(anyhow::anyhow!(
                    "g2 serve is running on this home: setting a session under it would split the group's live one; use `g2 sessions resume` (which goes through the host), or stop the host first"
                ));
            };
            let p = sessions.get(&folder).await?;
            let p = sessions.set(&folder, &session_id, p.generation).await?;
            println!(
                "{} is the active session of {folder}",
                p.session_id.unwrap_or_default()
            );
        }
        SessionsCmd::History { folder: _, out } => {
            let h = sessions.history(&folder).await?;
            out.print(&h, |h| {
                if h.is_empty() {
                    println!("no earlier sessions");
                }
                let mut table = super::output::Table::new(&[0]);
                for e in h {
                    table.row([
                        e.id.to_string(),
                        inert_name(&e.archived_at[..10.min(e.archived_at.len())]).into_owned(),
                        e.session_id.clone(),
                        inert_name(&e.name).into_owned(),
                    ]);
                }
                table.print()
            })?;
        }
        SessionsCmd::Clear {
            folder: _,
            name,
            out,
        } => {
            // The CLI's own words for an unknown group, before the one path.
            require_group(&store, &folder).await?;
            let cleared: crate::sessions::Cleared =
                match live::route(ctx, &store, "sessions").await? {
                    Route::Here(_lock) => sessions.clear_active(&folder, &name).await?,
                    Route::Host(api) => {
                        api.call(
                            reqwest::Method::POST,
                            &format!("/api/groups/{folder}/session/clear"),
                            Some(serde_json::json!({ "name": name })),
                        )
                        .await?
                    }
                };
            out.print(&cleared, |cleared| {
                println!(
                    "cleared session {} as history #{} {:?}",
                    cleared.history.session_id, cleared.history.id, cleared.history.name
                );
                match &cleared.archive {
                    Some(a) => println!("archived to {}", ctx.home.resolve(&a.path).display()),
                    None => println!("no transcript on disk; nothing archived"),
                }
                Ok(())
            })?;
        }
        SessionsCmd::Resume {
            folder: _,
            history_id,
            save_as,
            out,
        } => {
            require_group(&store, &folder).await?;
            let r: crate::sessions::Resumed = match live::route(ctx, &store, "sessions").await? {
                Route::Here(_lock) => {
                    sessions
                        .resume_active(&folder, history_id, save_as.as_deref())
                        .await?
                }
                Route::Host(api) => {
                    api.call(
                        reqwest::Method::POST,
                        &format!("/api/groups/{folder}/session/resume"),
                        Some(serde_json::json!({ "history_id": history_id, "save_as": save_as })),
                    )
                    .await?
                }
            };
            out.print(&r, |r| {
                if let Some(s) = &r.saved {
                    println!(
                        "saved session {} as history #{} {:?}",
                        s.session_id, s.id, s.name
                    );
                }
                println!(
                    "{} is the active session of {folder}",
                    r.pointer.session_id.as_deref().unwrap_or_default()
                );
                Ok(())
            })?;
        }
    }
    Ok(0)
}
