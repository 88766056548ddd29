//! A group's memory for the user's own MCP clients (Claude Desktop, Claude
//! Code on a laptop, Cursor): MCP over Streamable HTTP at `/mcp` on the
//! host's HTTP server (docs/mcp.md).
//!
//! - `tokens`: issuing, listing, revoking and checking the tokens, one
//!   group each, kept as a hash;
//! - `http`: the route, its checks (origin, token, back-off) and rmcp's
//!   transport;
//! - `tools`: what a client may call, each acting through the request
//!   server for the token's group, results quoted.
//!
//! **Invariant**: the group a call reads or changes is its token's; no
//! tool takes a group, and ids or paths of another group are "not found".

mod http;
pub mod tokens;
mod tools;

pub use http::routes;
