use super::*;

#[test]
fn only_a_whole_placeholder_block_names_its_memory() {
    let p = memory_placeholder("4f2a-9");
    assert_eq!(memory_placeholder_ref(&p), Some("4f2a-9"));
    assert!(
        serde_json::to_string(&p)
            .unwrap()
            .contains(MEMORY_PLACEHOLDER_MARK)
    );
    for not in [
        format!("see {p}"),
        format!("{p}\n"),
        memory_reminder("<g2-memory ref=\"a b\"/>"),
        memory_reminder("<g2-memory ref=\"\"/>"),
        memory_reminder("<g2-memory ref=\"x\"/> and more"),
        format!("<g2-memory ref=\"{}\"/>", "4f2a"),
    ] {
        assert_eq!(memory_placeholder_ref(&not), None, "{not}");
    }
    assert!(!valid_memory_ref(&"a".repeat(65)));
}

#[test]
fn input_uses_protocol_names() {
    let input: ContainerInput = serde_json::from_str(
        r#"{"prompt":"hi","sessionId":"x","groupFolder":"main","chatJid":"j","isMain":true}"#,
    )
    .unwrap();
    assert_eq!(input.session_id.as_deref(), Some("x"));
    assert!(!input.is_scheduled_task);
    let back = serde_json::to_string(&input).unwrap();
    assert!(back.contains("\"groupFolder\":\"main\"") && !back.contains("isScheduledTask"));
}

#[test]
fn task_shapes() {
    let r: TaskRequest = serde_json::from_str(
        r#"{"requestId":"r1","type":"resume_session","historyId":3,"saveCurrentAs":"x"}"#,
    )
    .unwrap();
    assert_eq!(
        r.action,
        Action::ResumeSession {
            history_id: 3,
            save_current_as: Some("x".into())
        }
    );
    let back = serde_json::to_value(&r).unwrap();
    assert_eq!(back["type"], "resume_session");
    assert_eq!(back["requestId"], "r1");
    let l: TaskRequest =
        serde_json::from_str(r#"{"requestId":"r2","type":"list_sessions"}"#).unwrap();
    assert_eq!(l.action, Action::ListSessions {});
    assert!(
        serde_json::from_str::<TaskRequest>(r#"{"requestId":"r","type":"register_group"}"#)
            .is_err(),
        "folder and name are required"
    );
    assert!(
        serde_json::from_str::<TaskRequest>(r#"{"requestId":"r","type":"format_disk"}"#).is_err()
    );
    let s: TaskRequest = serde_json::from_str(
            r#"{"requestId":"r3","type":"schedule_task","prompt":"p","scheduleType":"once","scheduleValue":"2026-01-01T00:00:00Z","groupFolder":"main"}"#,
        )
        .unwrap();
    assert_eq!(s.action.name(), "schedule_task");
    let m: TaskRequest =
        serde_json::from_str(r#"{"requestId":"r4","type":"send_message","text":"hi"}"#).unwrap();
    assert_eq!(
        m.action,
        Action::SendMessage {
            text: "hi".into(),
            chat_jid: None
        }
    );
}

#[test]
fn ipc_json_shapes() {
    let m: InputMessage = serde_json::from_str(r#"{"type":"message","text":"hi"}"#).unwrap();
    assert_eq!(m, InputMessage::Message { text: "hi".into() });
    let e = AgentEvent::Archive {
        path: "conversations/a.md".into(),
        title: "A".into(),
        session_id: None,
        compact_trigger: Some("manual".into()),
    };
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(v["type"], "archive");
    assert_eq!(v["compactTrigger"], "manual");
    assert!(serde_json::from_str::<AgentEvent>(r#"{"type":"bogus"}"#).is_err());
}

#[test]
fn capture_events_round_trip() {
    let events = [
        Captured::SessionStart {
            source: Some("startup".into()),
            transcript_path: Some("/home/node/.claude/projects/p/s.jsonl".into()),
        },
        Captured::Prompt {
            text: "hello".into(),
            private: false,
        },
        Captured::Prompt {
            text: String::new(),
            private: true,
        },
        Captured::Tool {
            tool_use_id: Some("toolu_1".into()),
            tool: "Edit".into(),
            input: serde_json::json!({ "file_path": "/workspace/group/a.rs" }),
            output: "ok".into(),
            files_read: vec![],
            files_modified: vec!["/workspace/group/a.rs".into()],
            ok: true,
            subagent: true,
        },
        Captured::Stop {
            reply: Some("Done.".into()),
        },
        Captured::SubagentStop {
            agent_id: Some("a1".into()),
            agent_type: Some("Explore".into()),
            reply: None,
        },
        Captured::SessionEnd {
            reason: Some("other".into()),
        },
    ];
    for event in events {
        let e = AgentEvent::Capture {
            session_id: Some("s".into()),
            at: "2026-01-01T00:00:00.000Z".into(),
            event,
        };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            serde_json::from_str::<AgentEvent>(&json).unwrap(),
            e,
            "{json}"
        );
    }
    let v: AgentEvent = serde_json::from_str(
            r#"{"type":"capture","sessionId":null,"at":"t","event":{"kind":"tool","toolUseId":"x","tool":"Bash","input":{"command":"ls"},"output":"","ok":false}}"#,
        )
        .unwrap();
    let AgentEvent::Capture {
        event:
            Captured::Tool {
                files_read,
                subagent,
                ..
            },
        ..
    } = v
    else {
        panic!("{v:?}")
    };
    assert!(
        files_read.is_empty() && !subagent,
        "lists and flags default"
    );
    assert!(
        serde_json::from_str::<AgentEvent>(
            r#"{"type":"capture","at":"t","event":{"kind":"bogus"}}"#
        )
        .is_err()
    );
    let wire = serde_json::to_value(AgentEvent::Capture {
        session_id: None,
        at: "t".into(),
        event: Captured::SubagentStop {
            agent_id: None,
            agent_type: None,
            reply: Some("r".into()),
        },
    })
    .unwrap();
    assert_eq!(wire["type"], "capture");
    assert_eq!(wire["event"]["kind"], "subagent_stop");
    assert_eq!(wire["event"]["agentId"], serde_json::Value::Null);
}

#[test]
fn hook_input_is_lenient() {
    let h = HookInput::parse(
        "PreCompact",
        br#"{"session_id":"s","transcript_path":"/t.jsonl","trigger":"auto"}"#,
    );
    assert_eq!(h.session_id.as_deref(), Some("s"));
    assert_eq!(h.transcript_path.as_deref(), Some("/t.jsonl"));
    assert_eq!(h.trigger.as_deref(), Some("auto"));
    let other = HookInput::parse(
        "SessionStart",
        br#"{"transcript_path":"/t.jsonl","source":"resume"}"#,
    );
    assert_eq!(other.transcript_path, None, "only PreCompact archives");
    assert_eq!(other.trigger, None);
    let junk = HookInput::parse("UserPromptSubmit", b"[1, \xff");
    assert_eq!(
        junk,
        HookInput {
            session_id: None,
            transcript_path: None,
            trigger: None,
        }
    );
}

#[test]
fn layout_is_under_the_workspace() {
    for p in [GROUP_DIR, GLOBAL_DIR, IPC_DIR, PROJECT_DIR, EXTRA_DIR] {
        assert!(p.starts_with(WORKSPACE), "{p}");
        assert!(!in_workspace(p).starts_with('/') && !in_workspace(p).is_empty());
    }
    assert_eq!(in_workspace(GROUP_DIR), "group");
    assert!(CLAUDE_DIR.starts_with(AGENT_HOME));
    assert_eq!(AGENT_EXE, "/usr/local/bin/g2-agent");
    assert_eq!(hook_args(PRE_COMPACT), ["hook", "PreCompact"]);
}

#[test]
fn frames() {
    let f = ContainerOutput {
        status: OutputStatus::Success,
        result: None,
        new_session_id: Some("s".into()),
        error: None,
        trace: None,
    }
    .frame();
    assert_eq!(
        f,
        "---G2_OUTPUT_START---\n{\"status\":\"success\",\"result\":null,\"newSessionId\":\"s\"}\n---G2_OUTPUT_END---\n"
    );
}
