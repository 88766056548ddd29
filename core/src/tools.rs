//! The arguments of the memory and session tools both of g2's MCP servers
//! offer: the agent's (`g2-agent mcp`, stdio, inside the container) and a
//! user's own clients' (`/mcp` on the host). One definition, so the two
//! take the same arguments under the same descriptions (their doc
//! comments are the JSON schema's).

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Words or a question to find in archived conversations (any word finds; archives holding all of them rank first; word* matches a prefix).
    pub query: String,
    /// Most results (default 10).
    pub limit: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct MemorySearchArgs {
    /// A question or words, as a person would ask (no word is required).
    pub query: String,
    /// Most results (default 10).
    pub limit: Option<usize>,
    /// Only this kind: passage, observation, summary, or an observation kind (decision, fact, preference, todo, person, change, bugfix, discovery).
    pub kind: Option<String>,
    /// Only memories from this time on (RFC 3339 or YYYY-MM-DD).
    pub since: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct MemoryTimelineArgs {
    /// A memory id from memory_search (o12, p34, s3, b5).
    pub id: Option<String>,
    /// Or a question: the timeline around its best hit.
    pub query: Option<String>,
    /// Entries before (default 2).
    pub before: Option<usize>,
    /// Entries after (default 2).
    pub after: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
pub struct MemoryGetArgs {
    /// Memory ids from memory_search (o12, p34, s3, b5).
    pub ids: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct RememberArgs {
    /// What to remember, as one statement ("the boat is moored at pier 7").
    pub text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct ForgetArgs {
    /// An observation id from memory_search (o12).
    pub id: String,
}
