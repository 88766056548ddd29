//! "JSON or text": the one place a command's `--json` is honoured.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use serde::Serialize;

// No doc comment: clap would take it for the commands' about text.
#[derive(Args, Clone, Copy)]
pub struct Output {
    /// Print JSON (the shapes are documented in docs/cli.md).
    #[arg(long)]
    pub json: bool,
}

impl Output {
    /// Prints `value` as pretty JSON with `--json`; else `text` prints it
    /// for people.
    pub fn print<T: Serialize>(self, value: &T, text: impl FnOnce(&T) -> Result<()>) -> Result<()> {
        if self.json {
            let mut w = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut w, value)?;
            writeln!(w)?;
            Ok(())
        } else {
            text(value)
        }
    }
}
