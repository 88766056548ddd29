//! Where `g2 chat` reads lines and prints. On a terminal: a line editor
//! with a `you> ` prompt, and whatever arrives meanwhile is printed above
//! the line being typed (which is redrawn, not mangled). Piped: plain
//! lines in, and only the chat's messages on stdout (notes on stderr), so
//! a script reads clean output.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::{Error, Result};

/// The prompt shown on a terminal.
const PROMPT: &str = "you> ";

/// Prints messages and notes; cheap to clone.
#[derive(Clone)]
pub struct Screen(Option<Arc<Mutex<Printer>>>);

type Printer = Box<dyn rustyline::ExternalPrinter + Send>;

impl Screen {
    /// A message of the chat.
    pub fn message(&self, text: &str) {
        self.print(text, false);
    }

    /// A note of the client's own (the banner, reconnecting, hints).
    pub fn note(&self, text: &str) {
        self.print(text, true);
    }

    fn print(&self, text: &str, note: bool) {
        match &self.0 {
            Some(p) => {
                if let Ok(mut p) = p.lock() {
                    let _ = p.print(format!("{text}\n"));
                }
            }
            // A closed stdout (`| head`) is not an error worth a word.
            None if note => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
            None => {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}").and_then(|()| out.flush());
            }
        }
    }
}

/// `/quit` or `/exit`.
pub fn is_quit(line: &str) -> bool {
    matches!(line.trim(), "/quit" | "/exit")
}

/// Opens the screen and the lines typed: a line editor when stdin and
/// stdout are a terminal, else stdin's lines. The lines end at end of
/// input (Ctrl-D); Ctrl-C on a terminal exits at once.
pub fn open() -> Result<(Screen, mpsc::Receiver<String>)> {
    let (tx, rx) = mpsc::channel(16);
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).await.is_err() {
                    break;
                }
            }
        });
        return Ok((Screen(None), rx));
    }
    let editor_error = |e: rustyline::error::ReadlineError| {
        Error::io("opening the terminal", std::io::Error::other(e))
    };
    let mut editor = rustyline::DefaultEditor::new().map_err(editor_error)?;
    let printer = editor.create_external_printer().map_err(editor_error)?;
    // The editor blocks on the terminal: a thread of its own.
    std::thread::spawn(move || {
        loop {
            let line = match editor.readline(PROMPT) {
                Ok(line) => line,
                // Ctrl-C: leave now, even with a line waiting for the host
                // (the editor has put the terminal back already).
                Err(rustyline::error::ReadlineError::Interrupted) => std::process::exit(130),
                Err(_) => break,
            };
            let _ = editor.add_history_entry(line.as_str());
            // Not back into the editor's raw mode once quitting: the
            // process exits, and would leave the terminal raw.
            let quit = is_quit(&line);
            if tx.blocking_send(line).is_err() || quit {
                break;
            }
        }
    });
    let printer: Printer = Box::new(printer);
    Ok((Screen(Some(Arc::new(Mutex::new(printer)))), rx))
}
