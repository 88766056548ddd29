//! "JSON or text": the one place a command's `--json` is honoured; the
//! text tables; and a closed stdout (`g2 … | head`), which is no error.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use unicode_width::UnicodeWidthStr;

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

/// Rows of columns for people: each column padded to its widest cell (as
/// wide as it shows on a terminal), the last one left as it is.
#[derive(Default)]
pub struct Table {
    rows: Vec<Vec<String>>,
    /// Columns aligned right (numbers).
    right: Vec<usize>,
}

impl Table {
    /// A table whose columns `right` (by index) are aligned right.
    pub fn new(right: &[usize]) -> Table {
        Table {
            rows: Vec::new(),
            right: right.to_vec(),
        }
    }

    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The table as lines, each ending with a newline.
    pub fn render(&self) -> String {
        let mut widths = Vec::<usize>::new();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if i == widths.len() {
                    widths.push(0);
                }
                widths[i] = widths[i].max(cell.width());
            }
        }
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let pad = " ".repeat(widths[i] - cell.width());
                let last = i + 1 == row.len();
                if i > 0 {
                    line.push_str("  ");
                }
                if self.right.contains(&i) {
                    line.push_str(&pad);
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&pad);
                    }
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Prints the table to stdout.
    pub fn print(&self) -> Result<()> {
        let mut w = std::io::stdout().lock();
        w.write_all(self.render().as_bytes())?;
        w.flush()?;
        Ok(())
    }
}

/// Whether an error is stdout's reader having gone (`g2 … | head`): the
/// command then stops quietly, with status 0.
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_whatever_their_width() {
        let mut t = Table::new(&[1]);
        t.row(["main", "1", "Main group", "[main]"]);
        t.row(["a-much-longer-folder-name", "120", "Famille é", ""]);
        t.row(["日本", "7", "x", "last"]);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        // Each column starts at the same display column on every line.
        let starts = |line: &str, cell: &str| line[..line.find(cell).unwrap()].width();
        assert_eq!(starts(lines[0], "Main"), starts(lines[1], "Famille"));
        assert_eq!(starts(lines[0], "Main"), starts(lines[2], "x"));
        assert_eq!(starts(lines[0], "[main]"), starts(lines[2], "last"));
        // Numbers end in one column; no trailing blanks.
        assert_eq!(
            starts(lines[0], "1") + 1,
            starts(lines[1], "120") + 3,
            "{text}"
        );
        assert_eq!(lines[1], "a-much-longer-folder-name  120  Famille é");
    }

    #[test]
    fn a_closed_pipe_is_told_apart() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(broken_pipe(&anyhow::Error::from(pipe).context("printing")));
        let json = serde_json::Error::io(std::io::ErrorKind::BrokenPipe.into());
        assert!(broken_pipe(&json.into()));
        assert!(!broken_pipe(&anyhow::anyhow!("no group")));
    }
}
