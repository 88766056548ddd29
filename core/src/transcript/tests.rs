use super::*;

fn parse(s: &str) -> Transcript {
    parse_reader(s.as_bytes(), DEFAULT_MAX_LINE).unwrap()
}

#[test]
fn empty_and_blank() {
    let t = parse("");
    assert!(t.entries.is_empty());
    assert_eq!(t.stats.lines, 0);
    let t = parse("\n\n   \n");
    assert!(t.entries.is_empty());
    assert_eq!(t.stats.malformed, 0);
}

#[test]
fn string_and_block_content_in_order() {
    let t = parse(concat!(
        r#"{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hello"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m1","content":[{"type":"thinking","thinking":"hmm"}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a2","message":{"id":"m1","content":[{"type":"text","text":"hi there"}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a3","message":{"id":"m1","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u2","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"SECRET TOOL OUTPUT"}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a4","message":{"id":"m2","content":[{"type":"text","text":"done"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u3","message":{"content":[{"type":"text","text":"thanks"},{"type":"image","source":{}}]}}"#,
    ));
    assert_eq!(
        t.entries,
        vec![
            Entry::User(vec!["hello".into()]),
            Entry::Assistant(vec!["hi there".into(), "done".into()]),
            Entry::User(vec!["thanks".into()]),
        ]
    );
    assert_eq!(t.session_id.as_deref(), Some("s"));
}

#[test]
fn malformed_unknown_and_meta_lines_are_skipped() {
    let t = parse(concat!(
        "not json\n",
        "{\"type\":\"user\",\"message\":{\"content\":\"cut\n",
        "[1,2,3]\n",
        r#"{"type":"brand-new-type","payload":{"deep":[1,{"x":null}]}}"#,
        "\n",
        r#"{"type":"user","isMeta":true,"message":{"content":"meta"}}"#,
        "\n",
        r#"{"type":"user","isSidechain":true,"message":{"content":"side"}}"#,
        "\n",
        r#"{"type":"user","message":{"content":"<command-name>/compact</command-name>"}}"#,
        "\n",
        r#"{"type":"user","message":{"content":[{"type":"text","text":"[Request interrupted by user]"}]}}"#,
        "\n",
        r#"{"type":"user","message":{"content":42}}"#,
        "\n",
        r#"{"type":"user","message":{"content":[{"type":"text","text":7}, "bare"]}}"#,
        "\n",
        r#"{"type":"user","message":{"content":"real"}}"#,
        "\n",
    ));
    assert_eq!(
        t.entries,
        vec![Entry::User(vec!["bare".into(), "real".into()])]
    );
    assert_eq!(t.stats.malformed, 3);
    assert_eq!(t.stats.skipped, 1);
}

#[test]
fn duplicate_uuids_count_once() {
    let line = r#"{"type":"user","uuid":"u1","message":{"content":"once"}}"#;
    let t = parse(&format!("{line}\n{line}\n"));
    assert_eq!(t.entries, vec![Entry::User(vec!["once".into()])]);
    assert_eq!(t.stats.duplicates, 1);
}

#[test]
fn reminders_are_stripped_from_summaries() {
    assert_eq!(
        strip_reminders(
            "Continued.\n\n<system-reminder>\n<tools></tools>\n</system-reminder>\nSummary:\n1. x"
        ),
        "Continued.\n\nSummary:\n1. x"
    );
    assert_eq!(
        strip_reminders("a <system-reminder>open"),
        "a <system-reminder>open"
    );
    assert_eq!(strip_reminders("plain"), "plain");
}

#[test]
fn compaction_is_kept_apart_from_user_speech() {
    let t = parse(concat!(
        r#"{"type":"user","message":{"content":"before"}}"#,
        "\n",
        r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"manual","preTokens":1234}}"#,
        "\n",
        r#"{"type":"user","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"content":"the summary"}}"#,
        "\n",
        r#"{"type":"user","message":{"content":"after"}}"#,
        "\n",
    ));
    assert_eq!(
        t.entries,
        vec![
            Entry::User(vec!["before".into()]),
            Entry::Compaction(Compaction {
                trigger: Some("manual".into()),
                pre_tokens: Some(1234),
                summary: Some("the summary".into())
            }),
            Entry::User(vec!["after".into()]),
        ]
    );
    assert_eq!(t.user_turns(), 2);
}

#[test]
fn summary_prefers_a_leaf_in_this_file() {
    let t = parse(concat!(
        r#"{"type":"summary","summary":"Mine","leafUuid":"u1"}"#,
        "\n",
        r#"{"type":"summary","summary":"Elsewhere","leafUuid":"zz"}"#,
        "\n",
        r#"{"type":"user","uuid":"u1","message":{"content":"x"}}"#,
        "\n",
    ));
    assert_eq!(t.summary(), Some("Mine"));
    let t = parse(r#"{"type":"summary","summary":"Only","leafUuid":"zz"}"#);
    assert_eq!(t.summary(), Some("Only"));
}

#[test]
fn huge_lines_are_read_or_skipped_without_failing() {
    let big = "x".repeat(5 << 20);
    let good = format!(r#"{{"type":"user","message":{{"content":"{big}"}}}}"#);
    let t = parse(&format!(
        "{good}\n{}\n",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"ok"}]}}"#
    ));
    assert_eq!(t.user_turns(), 1);
    assert_eq!(t.assistant_turns(), 1);

    // Over the limit: skipped, counted, and the next line still read.
    let input = format!(
        "{good}\n{}",
        r#"{"type":"user","message":{"content":"next"}}"#
    );
    let t = parse_reader(input.as_bytes(), 1 << 20).unwrap();
    assert_eq!(t.stats.oversized, 1);
    assert_eq!(t.entries, vec![Entry::User(vec!["next".into()])]);
    // An oversized last line with no newline.
    let t = parse_reader(good.as_bytes(), 1 << 20).unwrap();
    assert_eq!(t.stats.oversized, 1);
}

#[test]
fn line_splitting_across_buffer_refills() {
    // Lines straddling the 256 KiB buffer boundary must come out whole.
    let mut input = String::new();
    for i in 0..2000 {
        input.push_str(&format!(
            r#"{{"type":"user","uuid":"u{i}","message":{{"content":"{}"}}}}"#,
            "y".repeat(1 + i % 700)
        ));
        input.push('\n');
        input.push_str(&format!(
            r#"{{"type":"assistant","uuid":"a{i}","message":{{"content":[{{"type":"text","text":"r{i}"}}]}}}}"#
        ));
        input.push('\n');
    }
    let t = parse(&input);
    assert_eq!(t.stats.malformed, 0);
    assert_eq!(t.assistant_turns(), 2000);
    assert_eq!(t.entries[3999], Entry::Assistant(vec!["r1999".into()]));
}

/// A subagent's own transcript, as Claude Code writes it to
/// `<session>/subagents/agent-<id>.jsonl`: the parent's prompt, tool
/// traffic, and the answer, every line a sidechain.
const SUBAGENT: &str = concat!(
    r#"{"parentUuid":null,"isSidechain":true,"agentId":"a1b2c3d","sessionId":"parent","type":"user","uuid":"s1","message":{"role":"user","content":"Find where the config is loaded"}}"#,
    "\n",
    r#"{"parentUuid":"s1","isSidechain":true,"agentId":"a1b2c3d","type":"assistant","uuid":"s2","message":{"content":[{"type":"text","text":"Searching."},{"type":"tool_use","id":"t1","name":"Grep","input":{"pattern":"load"}}]}}"#,
    "\n",
    r#"{"parentUuid":"s2","isSidechain":true,"agentId":"a1b2c3d","type":"user","uuid":"s3","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"GREP OUTPUT"}]}}"#,
    "\n",
    r#"{"parentUuid":"s3","isSidechain":true,"agentId":"a1b2c3d","type":"assistant","uuid":"s4","message":{"content":[{"type":"text","text":"It is loaded in host/src/config.rs."}]}}"#,
    "\n",
);

#[test]
fn a_subagents_own_transcript_is_its_conversation() {
    let t = parse(SUBAGENT);
    assert!(t.subagent);
    assert_eq!(t.agent_id.as_deref(), Some("a1b2c3d"));
    assert_eq!(
        t.entries,
        vec![
            Entry::User(vec!["Find where the config is loaded".into()]),
            Entry::Assistant(vec![
                "Searching.".into(),
                "It is loaded in host/src/config.rs.".into()
            ]),
        ]
    );
    assert_eq!(t.session_id.as_deref(), Some("parent"));
    assert_eq!(t.stats.lines, 4);
    assert_eq!(t.stats.sidechain, 0, "a subagent's lines are read");
    assert_eq!(t.first_prompt(), Some("Find where the config is loaded"));
    // Fed line by line, it comes out the same.
    assert_eq!(parse_bytes(SUBAGENT.as_bytes()).entries, t.entries);
}

#[test]
fn sidechain_lines_stay_out_of_a_main_transcript() {
    // Older Claude Code wrote a subagent's lines into the main file.
    let main = concat!(
        r#"{"type":"user","uuid":"m1","isSidechain":false,"message":{"content":"look it up"}}"#,
        "\n",
    );
    let after = concat!(
        r#"{"type":"assistant","uuid":"m2","isSidechain":false,"message":{"content":[{"type":"text","text":"Found it."}]}}"#,
        "\n",
        r#"{"type":"system","subtype":"compact_boundary","isSidechain":true,"compactMetadata":{"trigger":"auto"}}"#,
        "\n",
    );
    let t = parse(&format!("{main}{SUBAGENT}{after}"));
    assert!(!t.subagent);
    assert_eq!(t.agent_id, None);
    assert_eq!(
        t.entries,
        vec![
            Entry::User(vec!["look it up".into()]),
            Entry::Assistant(vec!["Found it.".into()]),
        ]
    );
    assert_eq!(t.stats.sidechain, 4);
    assert_eq!(t.stats.skipped, 1, "the sidechain's boundary");

    // Sidechain lines before the first main line are dropped too, and
    // a line without the flag is main.
    let unflagged = r#"{"type":"user","uuid":"m3","message":{"content":"plain"}}"#;
    let t = parse(&format!("{SUBAGENT}{unflagged}\n"));
    assert!(!t.subagent);
    assert_eq!(t.entries, vec![Entry::User(vec!["plain".into()])]);
    assert_eq!(t.stats.sidechain, 4);
}

#[test]
fn a_subagents_compaction_is_kept() {
    let t = parse(&format!(
        "{SUBAGENT}{}\n{}\n",
        r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"auto","preTokens":9}}"#,
        r#"{"type":"user","isSidechain":true,"isCompactSummary":true,"message":{"content":"so far"}}"#,
    ));
    assert!(t.subagent);
    assert_eq!(t.compactions().count(), 1);
    assert_eq!(
        t.compactions().next().and_then(|c| c.summary.as_deref()),
        Some("so far")
    );
}

#[test]
fn escaped_strings_are_unescaped() {
    let t = parse(r#"{"type":"user","message":{"content":"a \"quoted\" line\nnext \u00e9"}}"#);
    assert_eq!(
        t.entries,
        vec![Entry::User(vec!["a \"quoted\" line\nnext é".into()])]
    );
}

#[test]
fn memory_sent_beside_a_prompt_is_not_the_users_speech() {
    let t = parse(concat!(
        r#"{"type":"user","message":{"content":[{"type":"text","text":"where is the boat?"},{"type":"text","text":"<system-reminder>\n<g2-memory>\npier 7\n</g2-memory>\n</system-reminder>"}]}}"#,
        "\n",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"At pier 7."}]}}"#,
        "\n",
    ));
    assert_eq!(
        t.entries,
        vec![
            Entry::User(vec!["where is the boat?".into()]),
            Entry::Assistant(vec!["At pier 7.".into()]),
        ]
    );
}

#[test]
fn each_entry_keeps_when_its_lines_were_said() {
    let t = parse(concat!(
        r#"{"type":"user","uuid":"u1","timestamp":"2026-05-01T09:00:00.000Z","message":{"content":"plan the trip"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a1","timestamp":"2026-05-01T09:00:05.000Z","message":{"content":[{"type":"text","text":"sure"}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a2","timestamp":"2026-05-01T09:00:09.000Z","message":{"content":[{"type":"text","text":"Lisbon?"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u2","message":{"content":"no time on this line"}}"#,
        "\n",
        r#"{"type":"assistant","uuid":"a3","message":{"content":[{"type":"text","text":"ok"}]}}"#,
        "\n",
        r#"{"type":"user","uuid":"u3","timestamp":"2026-05-15T20:00:00.000Z","message":{"content":"two weeks on"}}"#,
        "\n",
    ));
    assert_eq!(t.entries.len(), t.times.len());
    let at = |s: &str| {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .with_timezone(&chrono::Utc)
    };
    let spans: Vec<Option<(String, String)>> = t
        .times
        .iter()
        .map(|s| s.map(|s| (s.first.to_rfc3339(), s.last.to_rfc3339())))
        .collect();
    assert_eq!(
        t.times[0],
        Some(Span {
            first: at("2026-05-01T09:00:00Z"),
            last: at("2026-05-01T09:00:00Z")
        })
    );
    assert_eq!(
        t.times[1],
        Some(Span {
            first: at("2026-05-01T09:00:05Z"),
            last: at("2026-05-01T09:00:09Z")
        }),
        "two lines of one reply: {spans:?}"
    );
    assert_eq!((t.times[2], t.times[3]), (None, None), "{spans:?}");
    assert_eq!(t.times[4].unwrap().first, at("2026-05-15T20:00:00Z"));
}
