//! Every real transcript in tests/fixtures/transcripts archives cleanly, and the
//! archive says what the conversation said: the right turns, no tool output
//! or thinking, messages cut at 2,000 characters, the right title.

use crate::support::*;
use g2_core::transcript;

struct Expect {
    file: &'static str,
    title: &'static str,
    user_turns: usize,
    assistant_turns: usize,
    compactions: usize,
    /// Text that must not be in the archive (tool output, thinking).
    absent: &'static [&'static str],
    /// Text that must be.
    present: &'static [&'static str],
}

const FIXTURES: &[Expect] = &[
    Expect {
        file: "ccl-claude-p-94604a7b.jsonl",
        title: "What are the tools that are available to you (allowed or not)?",
        user_turns: 1,
        assistant_turns: 1,
        compactions: 0,
        absent: &[],
        present: &["**User**: What are the tools that are available to you (allowed or not)?"],
    },
    Expect {
        file: "ccl-v1.0.51-summary-lines-37f83ec9.jsonl",
        // Summary lines point outside the file: the last one is the title.
        title: "Cache Version Compatibility Tests Added",
        user_turns: 6,
        assistant_turns: 6,
        compactions: 0,
        absent: &["diff --git a/claude_code_log/renderer.py", "\u{1b}["],
        present: &["**User**: Hey Claude, please have a look at the git diff"],
    },
    Expect {
        file: "spotter-auto-compact-4d5611e5.jsonl",
        title: "Work on bead spotter-dov. Run bd show spotter-dov to see the issue details and…",
        user_turns: 2,
        assistant_turns: 3,
        compactions: 1,
        absent: &["Owner: Marco Rotili", "<task-notification>"],
        present: &[
            "**User**: continue",
            "*Conversation compacted (auto, 170251 tokens before).*",
            "**Summary**: This session is being continued from a previous conversation",
        ],
    },
    Expect {
        file: "spotter-short.jsonl",
        title: "mix phx.server doesnt seem to start",
        user_turns: 1,
        assistant_turns: 1,
        compactions: 0,
        absent: &[
            "The user doesn't want to proceed with this tool use",
            "The user is having trouble starting their Phoenix server",
            "[Request interrupted",
        ],
        present: &["**G2**: Let me check the project structure"],
    },
    Expect {
        file: "spotter-tool-heavy.jsonl",
        title: "start phoenix in background",
        user_turns: 2,
        assistant_turns: 1,
        compactions: 0,
        absent: &[
            "Command running in background with ID",
            "The user wants me to research why scrolling",
            "<command-name>",
            "Reconnected to tidewave",
            "Caveat:",
        ],
        present: &["**User**: scrolling back in xterm.js still does not work"],
    },
];

#[test]
fn every_fixture_is_covered() {
    let mut files: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut covered: Vec<&str> = FIXTURES.iter().map(|f| f.file).collect();
    covered.sort();
    assert_eq!(files, covered, "a fixture has no expectations here");
}

#[test]
fn parser_reads_every_fixture_without_malformed_lines() {
    for f in FIXTURES {
        let t = transcript::parse_file(&fixture(f.file)).unwrap();
        assert_eq!(t.stats.malformed, 0, "{}", f.file);
        assert_eq!(t.stats.oversized, 0, "{}", f.file);
        assert_eq!(t.user_turns(), f.user_turns, "user turns of {}", f.file);
        assert_eq!(
            t.assistant_turns(),
            f.assistant_turns,
            "assistant turns of {}",
            f.file
        );
        assert_eq!(
            t.compactions().count(),
            f.compactions,
            "compactions of {}",
            f.file
        );
        // Turns alternate with compactions in between: no two turns of one
        // role follow each other.
        for w in t.entries.windows(2) {
            assert!(
                std::mem::discriminant(&w[0]) != std::mem::discriminant(&w[1]),
                "{}: two entries of one kind in a row",
                f.file
            );
        }
    }
}

/// Counts lines of the archive that open a turn of `who`.
fn turns(md: &str, who: &str) -> usize {
    let tag = format!("**{who}**: ");
    md.lines().filter(|l| l.starts_with(&tag)).count()
}

#[test]
fn every_fixture_archives_with_the_right_content() {
    let home = TestHome::new();
    for f in FIXTURES {
        let out = home.ok(&[
            "archive",
            fixture(f.file).to_str().unwrap(),
            "--group",
            "main",
        ]);
        let path = std::path::PathBuf::from(out.trim());
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(path.starts_with(home.path().join("groups/main/conversations")));

        let mut lines = md.lines();
        assert_eq!(
            lines.next(),
            Some(format!("# {}", f.title).as_str()),
            "{}",
            f.file
        );
        assert_eq!(lines.next(), Some(""));
        assert!(lines.next().unwrap().starts_with("Archived: "));
        assert_eq!(lines.next(), Some(""));
        assert_eq!(lines.next(), Some("---"));

        assert_eq!(turns(&md, "User"), f.user_turns, "{}", f.file);
        assert_eq!(turns(&md, "G2"), f.assistant_turns, "{}", f.file);
        assert_eq!(turns(&md, "Summary"), f.compactions, "{}", f.file);
        for a in f.absent {
            assert!(!md.contains(a), "{}: archive holds {a:?}", f.file);
        }
        for p in f.present {
            assert!(md.contains(p), "{}: archive lacks {p:?}", f.file);
        }
        // Nothing of the JSON envelope leaks through.
        for leak in ["\"tool_use_id\"", "\"type\":", "toolu_", "\"parentUuid\""] {
            assert!(!md.contains(leak), "{}: archive holds {leak:?}", f.file);
        }
    }
    assert_eq!(home.archives("main").len(), FIXTURES.len());
}

#[test]
fn messages_are_cut_at_2000_characters() {
    let home = TestHome::new();
    let t = transcript::parse_file(&fixture("spotter-auto-compact-4d5611e5.jsonl")).unwrap();
    // The compaction summary of this fixture is far longer than 2,000.
    let summary = t.compactions().next().unwrap().summary.clone().unwrap();
    assert!(summary.chars().count() > 2000);

    let out = home.ok(&[
        "archive",
        fixture("spotter-auto-compact-4d5611e5.jsonl")
            .to_str()
            .unwrap(),
        "--group",
        "main",
    ]);
    let md = std::fs::read_to_string(out.trim()).unwrap();
    let kept: String = summary.chars().take(2000).collect();
    assert!(
        md.contains(&format!("**Summary**: {kept}…")),
        "summary not cut at 2,000"
    );
    let next: String = summary.chars().take(2001).collect();
    assert!(!md.contains(&next));

    // Every paragraph of a turn is at most 2,000 characters plus the mark.
    for f in FIXTURES {
        let t = transcript::parse_file(&fixture(f.file)).unwrap();
        let md = g2_core::archive::render(
            "t",
            &t,
            &chrono::Utc::now().with_timezone(&g2_core::archive::dates::Tz::UTC),
            &Default::default(),
        );
        assert!(md.len() < std::fs::metadata(fixture(f.file)).unwrap().len() as usize + 200);
    }
}

#[test]
fn hostile_transcripts_archive_without_error() {
    let home = TestHome::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.jsonl");
    let huge = "z".repeat(6 << 20);
    let mut s = String::new();
    s.push_str("this is not json\n");
    s.push_str("{\"type\":\"user\",\"message\":{\"content\":\"truncated\n");
    s.push_str("\u{0}\u{1}\u{2} binary garbage \u{7f}\n");
    s.push_str(r#"{"type":"attachment","attachment":{"type":"new","data":[1,2,3]}}"#);
    s.push('\n');
    s.push_str(r#"{"type":"cost-state","x":1}"#);
    s.push('\n');
    s.push_str(&format!(
        r#"{{"type":"user","message":{{"content":"{huge}"}}}}"#
    ));
    s.push('\n');
    s.push_str(
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"still here"}]}}"#,
    );
    s.push('\n');
    std::fs::write(&path, &s).unwrap();

    let out = home.g2(&[
        "archive",
        path.to_str().unwrap(),
        "--group",
        "main",
        "--name",
        "Hostile",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped 3 malformed"), "{stderr}");
    let md = std::fs::read_to_string(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    assert!(md.contains("**G2**: still here"));
    assert_eq!(turns(&md, "User"), 1);
    assert!(md.len() < 4000, "the 6 MB message was not cut");

    // Empty file: a valid archive with no turns.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = home.ok(&["archive", empty.to_str().unwrap(), "--group", "main"]);
    let md = std::fs::read_to_string(out.trim()).unwrap();
    assert!(md.starts_with("# conversation-"), "{md}");

    // Missing file: a clear error, nothing written.
    let before = home.archives("main").len();
    let err = home.fails(&["archive", "/nonexistent.jsonl", "--group", "main"]);
    assert!(err.contains("not found"), "{err}");
    assert_eq!(home.archives("main").len(), before);
}
