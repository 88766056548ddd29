//! `g2 image build`, and the build `g2 serve` and `g2 run` make when the
//! engine has no agent image yet.

use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::Settings;
use crate::container::image;
use crate::home::Home;
use crate::{Error, Result};

use super::{Report, context, message};

/// What [`build_image`] did, and in how long; displays as its one line.
pub struct ImageBuild {
    pub outcome: image::Built,
    pub took: Duration,
}

impl fmt::Display for ImageBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            image::Built::UpToDate(d) => {
                write!(f, "{} is up to date (inputs {})", image::IMAGE, &d[..12])
            }
            image::Built::Built(d) => write!(
                f,
                "built {} in {:.1} s (inputs {})",
                image::IMAGE,
                self.took.as_secs_f64(),
                &d[..12]
            ),
        }
    }
}

/// Builds the agent image from Claude Code and a static g2-agent (`agent`,
/// else built with cargo in this checkout); skipped when an image with the
/// same inputs exists, unless `force`. The engine's output goes to
/// `report` as notes.
pub async fn build_image(
    home: &Home,
    settings: &Settings,
    agent: Option<PathBuf>,
    force: bool,
    report: &dyn Report,
) -> Result<ImageBuild> {
    let claude = crate::doctor::find_claude(home, settings).ok_or_else(|| {
        Error::Invalid(
            "Claude Code not found (run scripts/setup.sh or set claude_code.path)".into(),
        )
    })?;
    let agent = match agent {
        Some(a) => a,
        None => {
            let root = image::project_root().ok_or_else(|| {
                Error::Invalid(
                    "this g2 was not built from a checkout; pass --agent with a static g2-agent binary"
                        .into(),
                )
            })?;
            report.note(&format!(
                "building the static g2-agent (cargo, --target {})…",
                image::AGENT_TARGET
            ));
            tokio::task::spawn_blocking(move || image::build_agent(&root)).await??
        }
    };
    let inputs =
        tokio::task::spawn_blocking(move || image::Inputs::gather(agent, &claude)).await??;
    let docker = bollard::Docker::connect_with_defaults()
        .map_err(|e| message(&e))?
        .negotiate_version()
        .await
        .map_err(|e| context("no Docker engine answers (run scripts/setup.sh)", &e))?;
    let started = Instant::now();
    let outcome = image::build(&docker, inputs, force, |line| {
        report.note(&format!("  {line}"));
    })
    .await?;
    Ok(ImageBuild {
        outcome,
        took: started.elapsed(),
    })
}
