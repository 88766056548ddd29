//! Parsing the command language.

use serde_json::json;

use crate::gateway::offline::commands::help_text;
use crate::gateway::offline::{Command, parse_commands};

fn schedule(kind: &str, value: &str, prompt: &str) -> Command {
    schedule_in(None, false, kind, value, prompt)
}

fn schedule_in(
    folder: Option<&str>,
    group_context: bool,
    kind: &str,
    value: &str,
    prompt: &str,
) -> Command {
    Command::Schedule {
        kind: kind.into(),
        value: value.into(),
        prompt: prompt.into(),
        group_folder: folder.map(String::from),
        group_context,
    }
}

#[test]
fn schedule_values() {
    assert_eq!(
        parse_commands("g2:schedule cron 0 9 * * 1-5 Morning brief")[0],
        schedule("cron", "0 9 * * 1-5", "Morning brief")
    );
    assert_eq!(
        parse_commands("g2:schedule once \"2026-12-01T09:00:00Z\" Pay rent")[0],
        schedule("once", "2026-12-01T09:00:00Z", "Pay rent")
    );
    assert_eq!(
        parse_commands("  g2:schedule interval 3600000 Check mail")[0],
        schedule("interval", "3600000", "Check mail")
    );
}

#[test]
fn task_message_and_group_commands_parse() {
    let cmds = parse_commands(
        "g2:send-to tg:-100123 Dinner at 7\n\
         g2:schedule-group interval 60000 Summarize the chat\n\
         g2:schedule-for family cron 0 8 * * * Good morning\n\
         g2:schedule-for family once \"2026-12-01T09:00:00\" Pay rent\n\
         g2:tasks\n\
         g2:pause task-1\n\
         g2:unpause task-1\n\
         g2:cancel task-1\n\
         g2:register family The Family Chat",
    );
    assert_eq!(
        cmds,
        [
            Command::SendTo {
                chat_jid: "tg:-100123".into(),
                text: "Dinner at 7".into()
            },
            schedule_in(None, true, "interval", "60000", "Summarize the chat"),
            schedule_in(Some("family"), false, "cron", "0 8 * * *", "Good morning"),
            schedule_in(
                Some("family"),
                false,
                "once",
                "2026-12-01T09:00:00",
                "Pay rent"
            ),
            Command::Tasks,
            Command::Pause("task-1".into()),
            Command::Unpause("task-1".into()),
            Command::Cancel("task-1".into()),
            Command::Register {
                folder: "family".into(),
                name: "The Family Chat".into()
            },
        ]
    );
    let why = |line: &str| match &parse_commands(line)[0] {
        Command::Invalid { why, .. } => why.clone(),
        other => panic!("{line} parsed as {other:?}"),
    };
    assert_eq!(why("g2:send-to tg:1"), "needs a chat jid and some text");
    assert_eq!(why("g2:pause"), "needs a task id (from g2:tasks)");
    assert_eq!(why("g2:cancel a b"), "needs a task id (from g2:tasks)");
    assert_eq!(why("g2:register family"), "needs a folder and a name");
    assert!(why("g2:schedule-for family").starts_with("usage: g2:schedule-for <folder>"));
    assert!(
        why("g2:schedule-for family hourly 1 x").contains("usage: g2:schedule-for <folder> <cron")
    );
    assert!(why("g2:schedule-group cron 0 9 * *").starts_with("usage: g2:schedule-group"));
    let help = help_text();
    for c in [
        "send-to",
        "schedule-group",
        "schedule-for",
        "tasks",
        "pause",
        "unpause",
        "cancel",
        "register",
    ] {
        assert!(help.contains(&format!("- g2:{c}")), "{c} missing from help");
    }
}

#[test]
fn tool_takes_any_name_and_a_json_object() {
    let tool = |name: &str, input: serde_json::Value| Command::Tool {
        name: name.into(),
        input,
    };
    assert_eq!(
        parse_commands(
            "g2:tool mcp__g2mem__memory_search {\"query\": \"the boat\", \"limit\": 3}\n\
             @G2 g2:tool Bash\t{ \"command\": \"ls -l\" }\n\
             g2:tool list-things"
        ),
        [
            tool(
                "mcp__g2mem__memory_search",
                json!({ "query": "the boat", "limit": 3 })
            ),
            tool("Bash", json!({ "command": "ls -l" })),
            tool("list-things", json!({})),
        ]
    );
    let why = |line: &str| match &parse_commands(line)[0] {
        Command::Invalid { why, .. } => why.clone(),
        other => panic!("{line} parsed as {other:?}"),
    };
    assert_eq!(
        why("g2:tool"),
        "needs a tool name: g2:tool <tool-name> [<json-object>]"
    );
    assert_eq!(
        why("g2:tool Bash {\"command\" ls}"),
        "needs a JSON object after the tool name: expected `:` at line 1 column 12"
    );
    assert_eq!(
        why("g2:tool Bash ls -l"),
        "needs a JSON object after the tool name: expected value at line 1 column 1"
    );
    assert_eq!(
        why("g2:tool Bash [\"ls\"]"),
        "needs a JSON object after the tool name, not an array"
    );
    assert_eq!(
        why("g2:tool Bash \"ls\""),
        "needs a JSON object after the tool name, not a string"
    );
    let bad_name = "needs a tool name of letters, digits, _ and - (at most 128)";
    assert_eq!(why("g2:tool mcp.server/tool {}"), bad_name);
    assert_eq!(why("g2:tool {\"command\":\"ls\"}"), bad_name);
    assert_eq!(why(&format!("g2:tool {}", "a".repeat(129))), bad_name);
    assert_eq!(
        parse_commands(&format!("g2:tool {}", "a".repeat(128)))[0],
        tool(&"a".repeat(128), json!({}))
    );
    assert!(help_text().contains("- g2:tool <tool-name> [<json-object>]: call any tool"));
}
