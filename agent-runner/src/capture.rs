//! What a capture hook records: Claude Code's hook JSON turned into a
//! [`Captured`] event, every text stripped of private parts and redacted
//! with [`g2_core::privacy`] and cut at the bounds of [`g2_core::wire`]
//! before anything is written.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Map, Value};

use g2_core::archive::truncate;
use g2_core::privacy::{self, Redactor};
use g2_core::wire::{self, Captured};

/// How much of a transcript's end is read for the last reply.
const TRANSCRIPT_TAIL: u64 = 64 << 10;

/// Input keys a tool summary keeps (Claude Code's built-in tools).
const SUMMARY_KEYS: &[&str] = &[
    "file_path",
    "notebook_path",
    "path",
    "command",
    "description",
    "pattern",
    "glob",
    "url",
    "query",
    "subagent_type",
    "prompt",
];

/// Tools whose `file_path` (or `notebook_path`) they read or change.
const READS: &[&str] = &["Read"];
const MODIFIES: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];

/// The event to record for hook `event` given its JSON `input`; `None` for
/// an event that is not captured or a skipped tool.
pub fn capture(event: &str, input: &Value, r: &Redactor, skip: &[String]) -> Option<Captured> {
    let name = |k: &str| {
        input[k]
            .as_str()
            .map(|s| r.bounded(s, wire::MAX_CAPTURE_NAME))
    };
    Some(match event {
        wire::SESSION_START => Captured::SessionStart {
            source: name("source"),
            transcript_path: input["transcript_path"]
                .as_str()
                .map(|s| r.bounded(s, wire::MAX_CAPTURE_FIELD)),
        },
        wire::USER_PROMPT_SUBMIT => {
            match privacy::prompt::kept(input["prompt"].as_str().unwrap_or(""), r) {
                None => Captured::Prompt {
                    text: String::new(),
                    private: true,
                },
                Some(text) => Captured::Prompt {
                    text,
                    private: false,
                },
            }
        }
        wire::POST_TOOL_USE | wire::POST_TOOL_USE_FAILURE => tool(event, input, r, skip)?,
        wire::STOP => Captured::Stop {
            reply: reply(input, "transcript_path", r),
        },
        wire::SUBAGENT_STOP => Captured::SubagentStop {
            agent_id: name("agent_id"),
            agent_type: name("agent_type"),
            reply: reply(input, "agent_transcript_path", r),
        },
        wire::SESSION_END => Captured::SessionEnd {
            reason: name("reason"),
        },
        _ => return None,
    })
}

/// The tools not worth capturing: `G2_SKIP_TOOLS` when the host set it,
/// else [`wire::SKIPPED_TOOLS`].
pub fn skipped_tools(from_env: Option<String>) -> Vec<String> {
    match from_env {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        None => wire::SKIPPED_TOOLS
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

fn tool(event: &str, input: &Value, r: &Redactor, skip: &[String]) -> Option<Captured> {
    let tool = input["tool_name"].as_str().unwrap_or("");
    if tool.is_empty() || skip.iter().any(|s| s == tool) {
        return None;
    }
    let args = &input["tool_input"];
    let path = ["file_path", "notebook_path"]
        .iter()
        .find_map(|k| args[*k].as_str())
        .map(|p| r.bounded(p, wire::MAX_CAPTURE_FIELD));
    let files = |kinds: &[&str]| -> Vec<String> {
        path.iter()
            .filter(|_| kinds.contains(&tool))
            .take(wire::MAX_CAPTURE_FILES)
            .cloned()
            .collect()
    };
    let failed = event == wire::POST_TOOL_USE_FAILURE;
    let response = &input["tool_response"];
    let raw_output = if failed {
        input["error"]
            .as_str()
            .map_or_else(String::new, str::to_string)
    } else {
        output_text(response)
    };
    Some(Captured::Tool {
        tool_use_id: input["tool_use_id"]
            .as_str()
            .map(|s| r.bounded(s, wire::MAX_CAPTURE_NAME)),
        tool: truncate(tool, wire::MAX_CAPTURE_NAME).into_owned(),
        input: summary(tool, args, r),
        output: cut_bytes(
            &r.clean_within(&raw_output, wire::MAX_CAPTURE_OUTPUT),
            wire::MAX_CAPTURE_OUTPUT,
        ),
        files_read: files(READS),
        files_modified: files(MODIFIES),
        ok: !failed && !response_failed(response),
        subagent: input["agent_id"].as_str().is_some_and(|a| !a.is_empty()),
    })
}

/// The compact input summary: the known keys of a built-in tool; for an
/// MCP tool (or one with none of them) its server, name and arguments.
fn summary(tool: &str, args: &Value, r: &Redactor) -> Value {
    let mut out = Map::new();
    if let Some(rest) = tool.strip_prefix("mcp__") {
        let (server, name) = rest.split_once("__").unwrap_or((rest, ""));
        out.insert("server".into(), server.into());
        out.insert("tool".into(), name.into());
    } else {
        for k in SUMMARY_KEYS {
            if let Some(v) = args[*k].as_str() {
                out.insert((*k).into(), r.bounded(v, wire::MAX_CAPTURE_FIELD).into());
            }
        }
        if !out.is_empty() {
            return Value::Object(out);
        }
    }
    if !args.is_null() && args.as_object().is_none_or(|o| !o.is_empty()) {
        let mut args = args.clone();
        clean_strings(&mut args, r);
        out.insert(
            "arguments".into(),
            truncate(&args.to_string(), wire::MAX_CAPTURE_ARGS)
                .into_owned()
                .into(),
        );
    }
    Value::Object(out)
}

/// Cleans every string inside `v` (values, not keys).
fn clean_strings(v: &mut Value, r: &Redactor) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(c) = r.clean_within(s, wire::MAX_CAPTURE_ARGS) {
                *s = c;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| clean_strings(x, r)),
        Value::Object(o) => o.values_mut().for_each(|x| clean_strings(x, r)),
        _ => {}
    }
}

/// The readable text of a tool's response: Bash's stdout and stderr, a
/// read file's content, an MCP tool's text blocks, or else its JSON.
fn output_text(resp: &Value) -> String {
    let str_of = |v: &Value| v.as_str().map(str::to_string);
    match resp {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.as_str().or_else(|| b["text"].as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => {
            if o.contains_key("stdout") || o.contains_key("stderr") {
                [&resp["stdout"], &resp["stderr"]]
                    .iter()
                    .filter_map(|v| v.as_str())
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n")
            } else if let Some(c) = str_of(&resp["file"]["content"])
                .or_else(|| str_of(&resp["content"]))
                .or_else(|| str_of(&resp["result"]))
            {
                c
            } else if let Some(Value::Array(a)) = o.get("content") {
                output_text(&Value::Array(a.clone()))
            } else if let Some(Value::Array(f)) = o.get("filenames") {
                f.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                resp.to_string()
            }
        }
        other => other.to_string(),
    }
}

fn response_failed(resp: &Value) -> bool {
    resp["is_error"].as_bool() == Some(true)
        || resp["isError"].as_bool() == Some(true)
        || resp["interrupted"].as_bool() == Some(true)
}

/// The last assistant text: the hook's `last_assistant_message`, or read
/// from the end of the transcript named by `path_key`.
fn reply(input: &Value, path_key: &str, r: &Redactor) -> Option<String> {
    let text = match input["last_assistant_message"].as_str() {
        Some(t) => Some(t.to_string()),
        None => input[path_key]
            .as_str()
            .filter(|p| !p.is_empty())
            .and_then(|p| last_reply(Path::new(p))),
    }?;
    Some(r.bounded(&text, wire::MAX_CAPTURE_REPLY)).filter(|t| !t.is_empty())
}

/// The text of the last assistant line within the transcript's last
/// [`TRANSCRIPT_TAIL`] bytes.
fn last_reply(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TRANSCRIPT_TAIL)))
        .ok()?;
    let mut tail = Vec::new();
    f.take(TRANSCRIPT_TAIL).read_to_end(&mut tail).ok()?;
    tail.split(|b| *b == b'\n').rev().find_map(|line| {
        let v: Value = serde_json::from_slice(line).ok()?;
        if v["type"] != "assistant" {
            return None;
        }
        let text = output_text(&v["message"]["content"]);
        Some(text).filter(|t| !t.trim().is_empty())
    })
}

/// Cuts `s` to at most `max` bytes at a character boundary, marking a cut
/// with `…`.
fn cut_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use g2_core::envelope;
    use serde_json::json;

    fn cap(event: &str, input: Value) -> Option<Captured> {
        capture(event, &input, &Redactor::default(), &skipped_tools(None))
    }

    #[test]
    fn the_skip_list_is_the_hosts_when_it_sets_one() {
        let bash = serde_json::json!({ "tool_name": "Bash", "tool_input": { "command": "ls" }, "tool_response": "x" });
        let todo =
            serde_json::json!({ "tool_name": "TodoWrite", "tool_input": {}, "tool_response": "" });
        let custom = skipped_tools(Some(" Bash, ,Grep ".into()));
        assert_eq!(custom, ["Bash", "Grep"]);
        let r = Redactor::default();
        assert!(capture("PostToolUse", &bash, &r, &custom).is_none());
        assert!(capture("PostToolUse", &todo, &r, &custom).is_some());
        assert!(capture("PostToolUse", &todo, &r, &skipped_tools(None)).is_none());
    }

    #[test]
    fn prompts_are_stripped_and_redacted() {
        let c = cap(
            "UserPromptSubmit",
            json!({"prompt": "deploy <private>pin 4417</private> with sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA"}),
        );
        let Some(Captured::Prompt { text, private }) = c else {
            panic!("{c:?}")
        };
        assert!(!private);
        assert!(
            !text.contains("4417") && !text.contains("AAAAAAAA"),
            "{text}"
        );
        assert!(text.contains("[redacted:anthropic-key]"), "{text}");
        assert_eq!(
            cap(
                "UserPromptSubmit",
                json!({"prompt": " <private>my pin is 4417</private> "})
            ),
            Some(Captured::Prompt {
                text: String::new(),
                private: true
            })
        );
    }

    #[test]
    fn tools_are_summarised_and_bounded() {
        let c = cap(
            "PostToolUse",
            json!({
                "tool_name": "Bash",
                "tool_use_id": "toolu_1",
                "tool_input": {"command": "echo password=hunter2", "description": "say", "timeout": 5},
                "tool_response": {"stdout": "x".repeat(10_000), "stderr": "", "interrupted": false},
            }),
        );
        let Some(Captured::Tool {
            input,
            output,
            ok,
            subagent,
            ..
        }) = c
        else {
            panic!("{c:?}")
        };
        assert_eq!(
            input,
            json!({"command": "echo password=[redacted:assignment]", "description": "say"})
        );
        assert!(output.len() <= wire::MAX_CAPTURE_OUTPUT && output.ends_with('…'));
        assert!(ok && !subagent);

        let c = cap(
            "PostToolUse",
            json!({
                "tool_name": "Write", "agent_id": "a1",
                "tool_input": {"file_path": "/workspace/group/n.md", "content": "secret stuff"},
                "tool_response": {"type": "create", "filePath": "/workspace/group/n.md", "content": "secret stuff"},
            }),
        );
        let Some(Captured::Tool {
            input,
            files_modified,
            files_read,
            subagent,
            ..
        }) = c
        else {
            panic!("{c:?}")
        };
        assert_eq!(input, json!({"file_path": "/workspace/group/n.md"}));
        assert_eq!(files_modified, ["/workspace/group/n.md"]);
        assert!(files_read.is_empty() && subagent);

        let c = cap(
            "PostToolUse",
            json!({
                "tool_name": "mcp__g2__send_message",
                "tool_input": {"text": "hi <private>x</private>"},
                "tool_response": [{"type": "text", "text": "sent"}],
            }),
        );
        let Some(Captured::Tool { input, output, .. }) = c else {
            panic!("{c:?}")
        };
        assert_eq!(
            input,
            json!({"server": "g2", "tool": "send_message", "arguments": r#"{"text":"hi "}"#})
        );
        assert_eq!(output, "sent");

        let c = cap(
            "PostToolUseFailure",
            json!({"tool_name": "Read", "tool_input": {"file_path": "/nope"}, "error": "File does not exist."}),
        );
        let Some(Captured::Tool {
            ok,
            output,
            files_read,
            ..
        }) = c
        else {
            panic!("{c:?}")
        };
        assert!(!ok);
        assert_eq!(output, "File does not exist.");
        assert_eq!(files_read, ["/nope"]);
    }

    #[test]
    fn low_value_tools_and_other_events_are_skipped() {
        for t in wire::SKIPPED_TOOLS {
            assert_eq!(
                cap("PostToolUse", json!({"tool_name": t, "tool_input": {}})),
                None
            );
        }
        assert_eq!(cap("PostToolUse", json!({})), None);
        assert_eq!(cap("Notification", json!({"message": "m"})), None);
    }

    #[test]
    fn replies_come_from_the_hook_or_the_transcript_tail() {
        let long = "é".repeat(3_000);
        let c = cap("Stop", json!({"last_assistant_message": long}));
        let Some(Captured::Stop { reply: Some(r) }) = c else {
            panic!("{c:?}")
        };
        assert_eq!(
            r.chars().count(),
            wire::MAX_CAPTURE_REPLY + 1,
            "cut, with the ellipsis"
        );

        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("s.jsonl");
        let lines = [
            json!({"type": "user", "message": {"role": "user", "content": "hi"}}),
            json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "Hello, token=abc123"}]}}),
            json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash"}]}}),
        ];
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&t, body).unwrap();
        let c = cap(
            "Stop",
            json!({"transcript_path": t.to_str().unwrap(), "stop_hook_active": false}),
        );
        assert_eq!(
            c,
            Some(Captured::Stop {
                reply: Some("Hello, token=[redacted:assignment]".into())
            })
        );
        assert_eq!(
            cap("Stop", json!({"transcript_path": "/no/such"})),
            Some(Captured::Stop { reply: None })
        );
    }

    #[test]
    fn byte_cuts_keep_characters_whole() {
        let s = "é".repeat(10);
        let c = cut_bytes(&s, 8);
        assert!(c.len() <= 8 && c.ends_with('…'), "{c}");
        assert_eq!(cut_bytes("abc", 8), "abc");
    }

    #[test]
    fn a_routed_prompts_private_text_is_dropped_though_escaped() {
        let prompt = envelope::write([
            ("Ann", "t1", "my pin is <private>4417</private>, call me"),
            ("Bob", "t2", "<private>all of it</private>"),
        ]);
        let Some(Captured::Prompt { text, private }) =
            cap("UserPromptSubmit", serde_json::json!({ "prompt": prompt }))
        else {
            panic!("a prompt");
        };
        assert!(!private);
        assert!(
            !text.contains("4417") && !text.contains("all of it"),
            "{text}"
        );
        let env = envelope::read(&text).unwrap();
        assert_eq!(env.messages.len(), 1);
        assert_eq!(env.messages[0].sender, "Ann");
        let all = envelope::write([("Ann", "t", "<private>4417</private>")]);
        assert!(matches!(
            cap("UserPromptSubmit", serde_json::json!({ "prompt": all })),
            Some(Captured::Prompt { private: true, .. })
        ));
    }
}
