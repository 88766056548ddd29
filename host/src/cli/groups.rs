//! `g2 groups`: register, list and remove chat groups.

use anyhow::Result;
use clap::Subcommand;

use g2_core::validate::GroupFolder;

use super::{Ctx, Output};
use crate::groups::{self, NewGroup};
use crate::store;
use crate::terminal::inert_name;

#[derive(Subcommand)]
pub(super) enum GroupsCmd {
    /// Register a group (and create its folder).
    Add {
        folder: String,
        #[arg(long)]
        name: String,
        /// Chat id: tg:<chat_id> for a Telegram chat, tg:<chat_id>:<topic_id> for a forum topic, wa:<number> for a WhatsApp chat with one person, wa:g:<group_id> for a WhatsApp group, sl:<team_id>:<channel_id> for a Slack channel (default: local:{folder}).
        #[arg(long)]
        jid: Option<String>,
        /// Regex a message must match to wake the agent (default: ^@{assistant}).
        #[arg(long, conflicts_with = "no_trigger")]
        trigger: Option<String>,
        /// Every message wakes the agent.
        #[arg(long)]
        no_trigger: bool,
        /// This is the main (admin) group.
        #[arg(long)]
        main: bool,
    },
    /// List registered groups.
    List {
        #[command(flatten)]
        out: Output,
    },
    /// Unregister a group (its folder, sessions and archives stay).
    Remove { folder: String },
    /// Turn the group's memory capture on or off (`memory.capture`).
    Capture {
        folder: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Turn memory injection of a group's sessions on or off (`memory.inject`).
    Inject {
        folder: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: GroupsCmd) -> Result<i32> {
    let store = ctx.store().await?;
    match cmd {
        GroupsCmd::Add {
            folder,
            name,
            jid,
            trigger,
            no_trigger,
            main,
        } => {
            let new = NewGroup {
                folder,
                name,
                jid,
                trigger_pattern: trigger,
                requires_trigger: no_trigger.then_some(false),
                is_main: main,
            };
            let group =
                groups::register(&store, &ctx.home, new, &ctx.settings.assistant_name).await?;
            println!(
                "registered {} (groups/{}/)",
                inert_name(&group.name),
                group.folder
            );
        }
        GroupsCmd::List { out } => {
            let all = store.read(store::groups::list).await?;
            out.print(&all, |all| {
                if all.is_empty() {
                    println!("no groups (run `g2 init`)");
                }
                let mut table = super::output::Table::new(&[]);
                for g in all {
                    let trigger = if g.requires_trigger {
                        g.trigger_pattern.as_deref().unwrap_or_default()
                    } else {
                        "(no trigger)"
                    };
                    table.row([
                        g.folder.to_string(),
                        inert_name(&g.name).into_owned(),
                        inert_name(&g.jid).into_owned(),
                        inert_name(trigger).into_owned(),
                        if g.is_main { "[main]" } else { "" }.to_string(),
                    ]);
                }
                table.print()?;
                Ok(())
            })?;
        }
        GroupsCmd::Capture { folder, state } => {
            let group = super::require_group(&store, &folder).await?;
            let mut config = group.container_config;
            config.memory.capture = Some(state == "on");
            let f = group.folder.clone();
            store
                .write(move |tx| store::groups::set_container_config(tx, &f, &config))
                .await?;
            println!("memory capture of {} is {state}", group.folder);
        }
        GroupsCmd::Inject { folder, state } => {
            let group = super::require_group(&store, &folder).await?;
            let mut config = group.container_config;
            config.memory.inject = Some(state == "on");
            let f = group.folder.clone();
            store
                .write(move |tx| store::groups::set_container_config(tx, &f, &config))
                .await?;
            println!("memory injection of {} is {state}", group.folder);
        }
        GroupsCmd::Remove { folder } => {
            let folder = GroupFolder::new(folder)?;
            let g: groups::Group = match super::live::route(ctx, &store, "groups").await? {
                super::live::Route::Here(_lock) => groups::remove(&store, &folder).await?,
                super::live::Route::Host(api) => {
                    api.call(
                        reqwest::Method::DELETE,
                        &format!("/api/groups/{folder}"),
                        None,
                    )
                    .await?
                }
            };
            println!(
                "removed {} (groups/{}/ and its sessions are kept)",
                inert_name(&g.name),
                g.folder
            );
        }
    }
    Ok(0)
}
