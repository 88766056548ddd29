//! The g2 host library. The `g2` binary is a thin clap layer over it.
//!
//! Bird's-eye view: a [`home::Home`] is a directory holding `groups/` and
//! `data/`; the [`store::Store`] is the SQLite database in `data/g2.db`; the
//! [`sessions::SessionManager`] keeps each group's active session pointer and
//! its history; [`archives`] turns transcripts into markdown files that
//! [`search`] finds again. See ARCHITECTURE.md for the code map and the
//! invariants of each module.
//!
//! Two layers sit below the host as crates of their own, so the compiler
//! keeps them below: the settings (`g2-settings`, here [`config`]) and the
//! store (`g2-store`, here [`store`]: all SQL, the migrations, the rows and
//! the [`Error`] they share with the host). Neither imports anything from
//! the host.

pub mod agent;
pub mod api;
pub mod archives;
pub mod background;
pub mod backup;
pub mod channels;
pub mod chat;
pub mod cli;
pub mod cluster;
pub mod container;
pub mod doctor;
pub mod gateway;
pub mod groups;
pub mod home;
pub mod host;
pub mod http;
pub mod jid;
pub mod lanes;
pub mod lock;
pub mod mcp;
pub mod media;
pub mod memory;
pub mod messages;
pub mod requests;
pub mod routing;
pub mod search;
pub mod sessions;
pub mod tasks;
pub mod terminal;
pub mod trace;
pub mod viewer;
pub mod zone;

pub use g2_settings as config;
pub use g2_store as store;
pub use g2_store::error;
pub use g2_store::now_rfc3339;
pub use g2_store::{Error, Result};

/// The Claude Code version this build of g2 is tested with (the one file
/// that pins it: `CLAUDE_CODE_VERSION` at the project root).
pub const CLAUDE_CODE_VERSION: &str = include_str!("../../CLAUDE_CODE_VERSION");
