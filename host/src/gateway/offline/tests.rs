//! The offline model's tests: whole conversations through [`answer`],
//! and the reply encoding; command parsing in `tests/commands.rs`.

use serde_json::json;

use super::*;

mod commands;

fn tools() -> Value {
    json!(
        [
            "Bash",
            "Read",
            "Write",
            "Edit",
            "mcp__g2__clear_session",
            "mcp__g2__list_sessions",
            "mcp__g2__resume_session",
            "mcp__g2__search_sessions",
            "mcp__g2__send_message",
            "mcp__g2__schedule_task",
            "mcp__g2__list_tasks",
            "mcp__g2__pause_task",
            "mcp__g2__resume_task",
            "mcp__g2__cancel_task",
            "mcp__g2__register_group",
            "mcp__g2__refresh_groups"
        ]
        .iter()
        .map(|n| json!({ "name": n, "input_schema": {} }))
        .collect::<Vec<_>>()
    )
}

fn req(messages: Value) -> Value {
    let mut messages = messages;
    if let Some(m) = messages.as_array_mut() {
        m.insert(0, json!({ "role": "system", "content": [{ "type": "text",
            "text": "# Environment\n - Primary working directory: /work/g\n - Platform: linux" }] }));
    }
    json!({ "model": "m", "max_tokens": 100, "tools": tools(), "messages": messages,
            "system": [{ "type": "text", "text": "You are Claude Code." }] })
}

fn text(a: &Answer) -> &str {
    match &a.blocks[..] {
        [Block::Text(t)] => t,
        other => panic!("not a text answer: {other:?}"),
    }
}

fn call(a: &Answer) -> (&str, &str, &Value) {
    match &a.blocks[..] {
        [Block::ToolUse { id, name, input }] => (id, name, input),
        other => panic!("not a tool call: {other:?}"),
    }
}

#[test]
fn quotes_a_plain_prompt_skipping_wrappers_and_system_entries() {
    let r = req(json!([
        { "role": "user", "content": [
            { "type": "text", "text": "<system-reminder>ctx</system-reminder>" },
            { "type": "text", "text": "hello there" } ] },
        { "role": "system", "content": "" }
    ]));
    let a = answer(&r).unwrap();
    assert_eq!(a.stop_reason, "end_turn");
    assert_eq!(text(&a), "Offline model (g2) received: \"hello there\"");
    let routed = "<messages>\n<message sender=\"Ann\" time=\"t\">hi &amp; &lt;b&gt;</message>\n<message sender=\"Bo\" time=\"t\">g2:sessions</message>\n</messages>";
    assert_eq!(unwrap_messages(routed), "hi & <b>\ng2:sessions");
    assert_eq!(
        parse_commands(&unwrap_messages(routed)),
        vec![Command::Sessions]
    );
    assert_eq!(unwrap_messages("plain"), "plain");
    let again = format!("[g2: your previous attempt was interrupted.]\n{routed}");
    assert_eq!(unwrap_messages(&again), "hi & <b>\ng2:sessions");
    let other = format!("someone's preface\n{routed}");
    assert_eq!(unwrap_messages(&other), other);
    // A chat's mention before a command (`@G2 g2:…`) leaves it a command;
    // a mention alone, or a word that is not one, does not make one.
    assert_eq!(
        parse_commands("@G2 g2:sessions\n@G2\nsay g2:sessions"),
        vec![Command::Sessions]
    );
}

#[test]
fn bash_calls_the_tool_then_reports_the_result() {
    let r = req(json!([{ "role": "user", "content": "g2:bash echo hi" }]));
    let a = answer(&r).unwrap();
    let (id, name, input) = call(&a);
    assert_eq!((name, input["command"].as_str()), ("Bash", Some("echo hi")));
    assert_eq!(a.stop_reason, "tool_use");
    let r = req(json!([
        { "role": "user", "content": "g2:bash echo hi" },
        { "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Bash", "input": input }] },
        { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "hi", "is_error": false }] }
    ]));
    let a = answer(&r).unwrap();
    assert_eq!(text(&a), "g2:bash echo hi: hi");
}

#[test]
fn several_commands_run_in_order_one_call_per_turn() {
    let prompt = "please\ng2:sessions\ng2:search tax return\ng2:nope\ng2:resume 7 before-tax";
    let mut msgs = vec![json!({ "role": "user", "content": prompt })];
    let mut names = Vec::new();
    loop {
        let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
        if a.stop_reason == "end_turn" {
            let t = text(&a);
            assert!(
                t.contains("g2:sessions: result of mcp__g2__list_sessions"),
                "{t}"
            );
            assert!(t.contains("unknown command \"nope\""), "{t}");
            assert!(
                t.contains("g2:resume 7: result of mcp__g2__resume_session"),
                "{t}"
            );
            break;
        }
        let (id, name, input) = call(&a);
        if name == "mcp__g2__resume_session" {
            assert_eq!(
                input,
                &json!({ "history_id": 7, "save_current_as": "before-tax" })
            );
        }
        names.push(name.to_string());
        msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": name, "input": input }] }));
        msgs.push(
            json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
            "content": [{ "type": "text", "text": format!("result of {name}") }] }] }),
        );
        assert!(names.len() < 10, "loops: {names:?}");
    }
    assert_eq!(
        names,
        [
            "mcp__g2__list_sessions",
            "mcp__g2__search_sessions",
            "mcp__g2__resume_session"
        ]
    );
}

#[test]
fn remember_reads_then_writes_the_whole_file() {
    let mut msgs = vec![json!({ "role": "user", "content": "g2:remember Likes tea" })];
    let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
    let (id, name, input) = call(&a);
    assert_eq!(name, "Read");
    assert_eq!(input["file_path"], "/work/g/CLAUDE.md");
    msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Read", "input": input }] }));
    msgs.push(json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
        "content": "     1\t# Main\n     2→\n     3\tRules\n<system-reminder>x</system-reminder>" }] }));
    let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
    let (id, name, input) = call(&a);
    assert_eq!(name, "Write");
    assert_eq!(input["content"], "# Main\n\nRules\nLikes tea\n");
    msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": "Write", "input": input }] }));
    msgs.push(json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "ok" }] }));
    let a = answer(&req(Value::Array(msgs))).unwrap();
    assert!(text(&a).contains("added to /work/g/CLAUDE.md"));
}

#[test]
fn missing_tools_and_bad_arguments_are_explained() {
    let mut r = req(
        json!([{ "role": "user", "content": "g2:clear\ng2:send hi\ng2:schedule cron 0 9 * *" }]),
    );
    r["tools"] = json!([{ "name": "Bash" }]);
    let a = answer(&r).unwrap();
    let t = text(&a);
    assert!(t.contains("`g2:clear` needs a name"), "{t}");
    assert!(t.contains("mcp__g2__send_message is not available"), "{t}");
    assert!(t.contains("usage: g2:schedule"), "{t}");
}

/// Runs a prompt to the end, answering each tool call with
/// `result of {name}`; returns the calls and the final text.
fn run(prompt: &str) -> (Vec<(String, Value)>, String) {
    let mut msgs = vec![json!({ "role": "user", "content": prompt })];
    let mut calls = Vec::new();
    loop {
        let a = answer(&req(Value::Array(msgs.clone()))).unwrap();
        if a.stop_reason == "end_turn" {
            return (calls, text(&a).to_string());
        }
        let (id, name, input) = call(&a);
        calls.push((name.to_string(), input.clone()));
        msgs.push(json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": name, "input": input }] }));
        msgs.push(
            json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id,
            "content": [{ "type": "text", "text": format!("result of {name}") }] }] }),
        );
        assert!(calls.len() < 20, "loops: {calls:?}");
    }
}

#[test]
fn task_message_and_group_commands_call_the_g2_tools() {
    let (calls, t) = run("g2:send-to tg:-100123 Dinner at 7\n\
         g2:schedule cron 0 9 * * 1-5 Morning brief\n\
         g2:schedule-group interval 60000 Summarize the chat\n\
         g2:schedule-for family once 2026-12-01T09:00:00 Pay rent\n\
         g2:tasks\ng2:pause t1\ng2:unpause t1\ng2:cancel t1\n\
         g2:register family The Family Chat");
    let expected = [
        (
            "mcp__g2__send_message",
            json!({ "text": "Dinner at 7", "chat_jid": "tg:-100123" }),
        ),
        (
            "mcp__g2__schedule_task",
            json!({ "schedule_type": "cron", "schedule_value": "0 9 * * 1-5", "prompt": "Morning brief" }),
        ),
        (
            "mcp__g2__schedule_task",
            json!({ "schedule_type": "interval", "schedule_value": "60000",
            "prompt": "Summarize the chat", "context_mode": "group" }),
        ),
        (
            "mcp__g2__schedule_task",
            json!({ "schedule_type": "once", "schedule_value": "2026-12-01T09:00:00",
            "prompt": "Pay rent", "group_folder": "family" }),
        ),
        ("mcp__g2__list_tasks", json!({})),
        ("mcp__g2__pause_task", json!({ "task_id": "t1" })),
        ("mcp__g2__resume_task", json!({ "task_id": "t1" })),
        ("mcp__g2__cancel_task", json!({ "task_id": "t1" })),
        (
            "mcp__g2__register_group",
            json!({ "folder": "family", "name": "The Family Chat" }),
        ),
    ];
    let got: Vec<(&str, &Value)> = calls.iter().map(|(n, i)| (n.as_str(), i)).collect();
    let want: Vec<(&str, &Value)> = expected.iter().map(|(n, i)| (*n, i)).collect();
    assert_eq!(got, want);
    assert_eq!(
        t.lines().collect::<Vec<_>>(),
        [
            "g2:send-to tg:-100123: result of mcp__g2__send_message",
            "g2:schedule cron 0 9 * * 1-5: result of mcp__g2__schedule_task",
            "g2:schedule-group interval 60000: result of mcp__g2__schedule_task",
            "g2:schedule-for family once 2026-12-01T09:00:00: result of mcp__g2__schedule_task",
            "g2:tasks: result of mcp__g2__list_tasks",
            "g2:pause t1: result of mcp__g2__pause_task",
            "g2:unpause t1: result of mcp__g2__resume_task",
            "g2:cancel t1: result of mcp__g2__cancel_task",
            "g2:register family: result of mcp__g2__register_group",
        ]
    );
}

#[test]
fn compaction_gets_a_summary_of_the_conversation() {
    let r = req(json!([
        { "role": "user", "content": "Plan the tax return" },
        { "role": "assistant", "content": [{ "type": "text", "text": "Gather the forms first." },
            { "type": "tool_use", "id": "t1", "name": "Bash", "input": { "command": "ls forms" } }] },
        { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": "t1", "content": "w2.pdf" }] },
        { "role": "user", "content": "CRITICAL: Respond with TEXT ONLY. Your task is to create a detailed summary of the conversation so far" }
    ]));
    let t = answer(&r).unwrap();
    let t = text(&t).to_string();
    assert!(
        t.starts_with("<analysis>") && t.contains("<summary>") && t.ends_with("</summary>"),
        "{t}"
    );
    assert!(t.contains("Plan the tax return"));
    assert!(
        t.contains("Bash({\"command\":\"ls forms\"}) returned: w2.pdf"),
        "{t}"
    );
    assert!(t.contains("Gather the forms first."));
}

#[test]
fn events_form_a_valid_stream() {
    let a = Answer {
        blocks: vec![
            Block::Text("héllo wörld".into()),
            Block::ToolUse {
                id: "t".into(),
                name: "Bash".into(),
                input: json!({"command": "x"}),
            },
        ],
        stop_reason: "tool_use",
    };
    let ev = to_events(&a, "msg_1", "m", 10);
    assert!(ev[0].starts_with("event: message_start\n"));
    assert!(ev.last().unwrap().starts_with("event: message_stop\n"));
    let mut text = String::new();
    for e in &ev {
        let data: Value =
            serde_json::from_str(e.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        if data["delta"]["type"] == "text_delta" {
            text.push_str(data["delta"]["text"].as_str().unwrap());
        }
    }
    assert_eq!(text, "héllo wörld");
    assert!(answer(&json!({ "messages": "x" })).is_err());
    assert!(answer(&json!({ "messages": [] })).is_err());
}

#[test]
fn context_shows_the_injected_memory_blocks() {
    let req = json!({
        "system": [{ "type": "text", "text": "You are Claude Code." }],
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>SessionStart hook additional context: <g2-memory>\nRemembered:\n- [fact #1] the boat is moored at pier 7 (Ann)\n</g2-memory></system-reminder>" },
                { "type": "text", "text": "g2:context" }
            ] }
        ]
    });
    let a = answer(&req).unwrap();
    let shown = text(&a);
    assert!(shown.starts_with("g2:context:\n<g2-memory>"), "{shown}");
    assert!(shown.contains("pier 7 (Ann)\n</g2-memory>"), "{shown}");
    // Earlier prompts' blocks and text that only names the tag are not
    // this request's; the session's and the current prompt's are, once.
    let start = "<system-reminder>SessionStart hook additional context: <g2-memory>\nat start\n</g2-memory></system-reminder>";
    let history = json!({
        "messages": [
            { "role": "user", "content": [
                { "type": "text", "text": start },
                { "type": "text", "text": "<system-reminder>\n<g2-memory>\nold prompt's\n</g2-memory>\n</system-reminder>" },
                { "type": "text", "text": "g2:help" }
            ] },
            { "role": "assistant", "content": "g2:context — show the memory (<g2-memory> blocks)" },
            { "role": "user", "content": [
                { "type": "text", "text": "<system-reminder>\n<g2-memory>\nthis prompt's\n</g2-memory>\n</system-reminder>" },
                { "type": "text", "text": "g2:context" }
            ] }
        ]
    });
    assert_eq!(
        text(&answer(&history).unwrap()),
        "g2:context:\n<g2-memory>\nat start\n</g2-memory>\n<g2-memory>\nthis prompt's\n</g2-memory>"
    );
    let none = json!({ "messages": [{ "role": "user", "content": "g2:context" }] });
    assert_eq!(
        text(&answer(&none).unwrap()),
        "g2:context: no memory was injected into this request"
    );
}

#[test]
fn tool_calls_the_named_tool_with_the_input_then_reports() {
    let cmd = Command::Tool {
        name: "mcp__g2mem__memory_search".into(),
        input: json!({ "query": "the boat", "limit": 3 }),
    };
    match next_step(&cmd, &[], "/work/g") {
        Next::Call { name, input } => {
            assert_eq!(name, "mcp__g2mem__memory_search");
            assert_eq!(input, json!({ "query": "the boat", "limit": 3 }));
        }
        Next::Done(t) => panic!("no call: {t}"),
    }
    let reported = |text: &str, is_error: bool| {
        let done = [request::Outcome {
            text: text.into(),
            is_error,
        }];
        match next_step(&cmd, &done, "/work/g") {
            Next::Done(t) => t,
            Next::Call { name, .. } => panic!("called {name} again"),
        }
    };
    assert_eq!(
        reported("o12 fact pier 7", false),
        "g2:tool mcp__g2mem__memory_search: o12 fact pier 7"
    );
    assert_eq!(
        reported("no such server", true),
        "g2:tool mcp__g2mem__memory_search failed: no such server"
    );

    // Through a conversation: the call goes out as given, and a tool the
    // agent was not given is reported, not called.
    let prompt = "g2:tool mcp__g2mem__memory_search {\"query\": \"the boat\"}\n\
                  g2:tool mcp__other__thing\ng2:tool Bash [1]";
    let mut r = req(json!([{ "role": "user", "content": prompt }]));
    r["tools"] = json!([{ "name": "mcp__g2mem__memory_search", "input_schema": {} }]);
    let a = answer(&r).unwrap();
    let (id, name, input) = call(&a);
    assert_eq!(
        (name, input),
        ("mcp__g2mem__memory_search", &json!({ "query": "the boat" }))
    );
    r["messages"].as_array_mut().unwrap().extend([
        json!({ "role": "assistant", "content": [{ "type": "tool_use", "id": id, "name": name, "input": input }] }),
        json!({ "role": "user", "content": [{ "type": "tool_result", "tool_use_id": id, "content": "o12 pier 7" }] }),
    ]);
    assert_eq!(
        text(&answer(&r).unwrap()),
        "g2:tool mcp__g2mem__memory_search: o12 pier 7\n\
         g2:tool mcp__other__thing: the tool mcp__other__thing is not available here\n\
         `g2:tool Bash [1]` needs a JSON object after the tool name, not an array. Send g2:help for the commands."
    );
}
