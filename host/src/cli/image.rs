//! `g2 image build`: the agent image.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;

use super::{Console, Ctx};

#[derive(Subcommand)]
pub(super) enum ImageCmd {
    /// Assemble the root filesystem and build the image (skipped when an
    /// image with the same inputs exists).
    Build {
        /// A static g2-agent to use (default: build it with cargo in this checkout).
        #[arg(long)]
        agent: Option<PathBuf>,
        /// Build even when the image is up to date.
        #[arg(long)]
        force: bool,
    },
}

pub(super) async fn run(ctx: &Ctx, cmd: ImageCmd) -> Result<i32> {
    match cmd {
        ImageCmd::Build { agent, force } => {
            let built =
                crate::host::build_image(&ctx.home, &ctx.settings, agent, force, &Console).await?;
            println!("{built}");
            Ok(0)
        }
    }
}
