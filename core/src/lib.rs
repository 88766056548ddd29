//! Code the g2 host and the `g2-agent` runner must agree on.
//!
//! Both sides of the container boundary archive transcripts (the host on
//! `clear_session`, the runner's PreCompact hook inside the container), so the
//! parser and the archiver live here, not in either binary. Nothing in this
//! crate touches the database or the network: it is pure functions over bytes
//! and files, which keeps the runner small and static.
//!
//! - [`validate`]: group folders, session ids and archive names, checked
//!   before they touch a path.
//! - [`transcript`]: streaming parser for Claude Code's JSONL transcripts.
//! - [`archive`]: renders a parsed transcript as markdown and writes it
//!   atomically, never overwriting.
//! - [`wire`]: the JSON that crosses the container boundary.
//! - [`ipc`]: the shared IPC folder's names and atomic writes.
//! - [`confined`]: file access beneath a directory handle that never
//!   follows a link, for the folders an agent can write.
//! - [`watch`]: inotify on IPC folders, our own reads never waking us.
//! - [`media`]: a message's files (voice notes, photos) as stored and named.
//! - [`quote`]: how what people and agents wrote is quoted in text g2
//!   speaks in (memory blocks, tool results).
//! - [`tools`]: the arguments of the memory and session tools both of
//!   g2's MCP servers offer.

pub mod archive;
pub mod confined;
pub mod envelope;
pub mod ipc;
pub mod media;
pub mod privacy;
pub mod quote;
pub mod tools;
pub mod trace;
pub mod transcript;
pub mod validate;
pub mod watch;
pub mod wire;
