use super::*;

fn fixtures() -> std::path::PathBuf {
    std::env::var_os("G2_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/transcripts")
        })
}

/// A transcript's batches with their tool calls, read from the raw
/// lines the way the capture hooks see them: a person's line starts a
/// batch, the assistant's text is its reply, each tool_use an activity
/// whose tool_result says whether it failed.
fn captured(name: &str) -> Vec<BatchInput> {
    use serde_json::{Value, json};
    let raw = std::fs::read_to_string(fixtures().join(name)).unwrap();
    let mut out: Vec<BatchInput> = Vec::new();
    let mut ids: Vec<(String, usize, usize)> = Vec::new();
    for line in raw.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if [
            v["isSidechain"].as_bool(),
            v["isMeta"].as_bool(),
            v["isCompactSummary"].as_bool(),
        ]
        .contains(&Some(true))
        {
            continue;
        }
        let content = &v["message"]["content"];
        let items: Vec<Value> = match content {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            _ => continue,
        };
        match v["type"].as_str() {
            Some("user") => {
                let text: Vec<&str> = items
                    .iter()
                    .filter(|i| i["type"] == "text")
                    .filter_map(|i| i["text"].as_str())
                    .collect();
                if !text.is_empty() {
                    out.push(BatchInput {
                        prompt_number: out.len() as i64 + 1,
                        prompt: text.join("\n\n"),
                        ..BatchInput::default()
                    });
                }
                for r in items.iter().filter(|i| i["type"] == "tool_result") {
                    let id = r["tool_use_id"].as_str().unwrap_or("");
                    if let Some((_, b, a)) = ids.iter().find(|(i, _, _)| i == id) {
                        let act = &mut out[*b].activities[*a];
                        act.ok = r["is_error"] != json!(true);
                        act.output = match &r["content"] {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                    }
                }
            }
            Some("assistant") => {
                let at = out.len().wrapping_sub(1);
                let Some(b) = out.last_mut() else { continue };
                for i in &items {
                    if let Some(t) = i["text"].as_str().filter(|_| i["type"] == "text") {
                        let r = b.reply.get_or_insert_with(String::new);
                        r.push_str("\n\n");
                        r.push_str(t);
                    }
                    if i["type"] == "tool_use" {
                        let tool = i["name"].as_str().unwrap_or("").to_string();
                        let path = i["input"]["file_path"]
                            .as_str()
                            .or(i["input"]["notebook_path"].as_str())
                            .map(str::to_string);
                        let mut input = serde_json::Map::new();
                        for k in ["command", "file_path", "pattern"] {
                            if let Some(x) = i["input"][k].as_str() {
                                input.insert(k.into(), x.into());
                            }
                        }
                        let edits = EDIT_TOOLS.contains(&tool.as_str());
                        ids.push((
                            i["id"].as_str().unwrap_or("").to_string(),
                            at,
                            b.activities.len(),
                        ));
                        b.activities.push(ActivityInput {
                            files_read: path.iter().filter(|_| tool == "Read").cloned().collect(),
                            files_modified: path.iter().filter(|_| edits).cloned().collect(),
                            tool,
                            input: Value::Object(input),
                            output: String::new(),
                            ok: true,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn routed(lines: &[(&str, &str)], reply: &str) -> BatchInput {
    let mut senders: Vec<String> = Vec::new();
    for (who, _) in lines {
        if !senders.iter().any(|s| s == who) {
            senders.push(who.to_string());
        }
    }
    BatchInput {
        prompt_number: 1,
        prompt: lines
            .iter()
            .map(|(w, t)| format!("{w}: {t}"))
            .collect::<Vec<_>>()
            .join("\n"),
        senders,
        reply: Some(reply.to_string()),
        activities: Vec::new(),
        at: "2026-11-22T09:00:00Z".into(),
    }
}

fn kinds_titles(obs: &[ObservationDraft]) -> Vec<(Kind, &str, &[String])> {
    obs.iter()
        .map(|o| (o.kind, o.title.as_str(), o.concerns.as_slice()))
        .collect()
}

/// Letters and digits only, lowercased: "occurs in what was said"
/// modulo whitespace, markup and the cut mark.
fn letters(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[test]
fn two_people_and_a_reply() {
    let b = routed(
        &[
            ("Ann", "remember that the boat is moored at pier 7"),
            ("Bob", "We always take the dog. Let's go with the red sail!"),
            ("Ann", "what time is it?"),
        ],
        "Got it. Let's check the weather first. I'll remind you tomorrow at 9 to check the ropes.",
    );
    let obs = observations(&b);
    let ann = ["Ann".to_string()];
    let bob = ["Bob".to_string()];
    let both = ["Ann".to_string(), "Bob".to_string()];
    assert_eq!(
        kinds_titles(&obs),
        [
            (Kind::Fact, "the boat is moored at pier 7", &ann[..]),
            (Kind::Preference, "We always take the dog", &bob[..]),
            (Kind::Decision, "Let's go with the red sail", &bob[..]),
            (
                Kind::Todo,
                "I'll remind you tomorrow at 9 to check the ropes",
                &both[..]
            ),
        ]
    );
    assert_eq!(obs[0].importance, 8);
    assert_eq!(
        obs[0].narrative,
        "Ann: remember that the boat is moored at pier 7"
    );
    assert_eq!(obs[0].facts, ["the boat is moored at pier 7"]);
    // The same batch gives the same drafts.
    assert_eq!(observations(&b), obs);
}

#[test]
fn what_each_rule_keeps() {
    let person = [
        (
            "my wifi password is hunter22",
            Some((Kind::Fact, 6, "my wifi password is hunter22")),
        ),
        (
            "The spare key is under the blue pot.",
            Some((Kind::Fact, 6, "The spare key is under the blue pot")),
        ),
        (
            "Ann's birthday is on May 3",
            Some((Kind::Fact, 6, "Ann's birthday is on May 3")),
        ),
        ("it is in the kitchen", None),
        (
            "Andy, note that the car is at the garage",
            Some((Kind::Fact, 8, "the car is at the garage")),
        ),
        (
            "**Remember**: the `door code` is 4411",
            Some((Kind::Fact, 8, "the door code is 4411")),
        ),
        ("remember the milk", None),
        (
            "don't forget to water the plants",
            Some((Kind::Todo, 7, "don't forget to water the plants")),
        ),
        (
            "Could you remind me to call mom tomorrow?",
            Some((Kind::Todo, 7, "remind me to call mom tomorrow")),
        ),
        (
            "I'll bring the cake on Friday",
            Some((Kind::Todo, 7, "I'll bring the cake on Friday")),
        ),
        (
            "I prefer tea over coffee",
            Some((Kind::Preference, 6, "I prefer tea over coffee")),
        ),
        (
            "we never eat before 8",
            Some((Kind::Preference, 6, "we never eat before 8")),
        ),
        (
            "I'm allergic to peanuts",
            Some((Kind::Preference, 6, "I'm allergic to peanuts")),
        ),
        ("I like that", None),
        (
            "Bob is my brother",
            Some((Kind::Person, 6, "Bob is my brother")),
        ),
        (
            "my boss's name is Kim",
            Some((Kind::Person, 6, "my boss's name is Kim")),
        ),
        (
            "I'm Ann, the treasurer",
            Some((Kind::Person, 6, "I'm Ann, the treasurer")),
        ),
        (
            "we decided to fly on the 3rd",
            Some((Kind::Decision, 7, "we decided to fly on the 3rd")),
        ),
        ("let's see", None),
        ("where is the boat?", None),
        ("should we go with Postgres?", None),
        ("what's the weather like", None),
    ];
    for (said, want) in person {
        let got = sentences(said)
            .first()
            .and_then(|s| classify(s, Speaker::Person))
            .map(|f| (f.kind, f.importance, f.title));
        assert_eq!(got, want.map(|(k, i, t)| (k, i, t.to_string())), "{said}");
    }
    let agent = [
        ("Let me look at the file.", None),
        ("Let's look at the logs", None),
        (
            "Let's do a final verification that both scenarios still work",
            None,
        ),
        ("I'll check the file", None),
        ("We'll use Postgres for the store.", Some(Kind::Decision)),
        ("I'll remind you on Friday", Some(Kind::Todo)),
        ("My favourite colour is blue", None),
        ("The config is in /etc/g2", None),
    ];
    for (said, want) in agent {
        let got = classify(said, Speaker::Agent).map(|f| f.kind);
        assert_eq!(got, want, "{said}");
    }
}

#[test]
fn duplicates_merge_and_long_titles_are_cut_at_a_word() {
    let long = "remember that the blue boat with the torn sail that we bought from the old fisherman down by the harbour last summer is moored at pier 7";
    let b = routed(
        &[
            ("Ann", "let's go with pizza"),
            ("Bob", "Let's go with pizza."),
            ("Ann", long),
        ],
        "",
    );
    let obs = observations(&b);
    assert_eq!(obs.len(), 2, "{obs:?}");
    assert_eq!(obs[0].kind, Kind::Decision);
    assert_eq!(obs[0].concerns, ["Ann", "Bob"]);
    let t = &obs[1].title;
    assert!(t.chars().count() <= MAX_TITLE, "{t}");
    let kept = t.strip_suffix('…').unwrap();
    assert!(long.contains(kept), "{t}");
    assert!(long[long.find(kept).unwrap() + kept.len()..].starts_with(' '));
}

fn bash(cmd: &str, ok: bool, output: &str) -> ActivityInput {
    ActivityInput {
        tool: "Bash".into(),
        input: serde_json::json!({ "command": cmd }),
        output: output.into(),
        ok,
        ..ActivityInput::default()
    }
}

#[test]
fn tool_calls_give_changes_fixes_and_discoveries() {
    let edit = ActivityInput {
        tool: "Edit".into(),
        input: serde_json::json!({ "file_path": "/workspace/group/src/main.rs" }),
        files_modified: vec!["/workspace/group/src/main.rs".into()],
        ok: true,
        ..ActivityInput::default()
    };
    let mut b = routed(&[("Ann", "the build is broken")], "");
    b.activities = vec![
        bash(
            "cargo   test",
            false,
            "\nerror[E0425]: cannot find value `x`\n",
        ),
        edit.clone(),
        bash("cargo test", true, "ok"),
        bash("ls", true, "src"),
    ];
    b.reply = Some("The test failed because `x` was never declared. Fixed.".into());
    let obs = observations(&b);
    let kinds: Vec<Kind> = obs.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, [Kind::Bugfix, Kind::Change], "{obs:?}");
    assert_eq!(obs[0].title, "The test failed because x was never declared");
    assert_eq!(
        obs[0].facts,
        [
            "cargo test",
            "error[E0425]: cannot find value `x`",
            "src/main.rs"
        ]
    );
    assert_eq!(obs[0].concerns, ["Ann"]);
    assert_eq!(obs[1].title, "Changed main.rs");
    assert_eq!(obs[1].files, ["/workspace/group/src/main.rs"]);
    assert_eq!(obs[1].importance, 4);

    // Commands the reply explains, without a fix: a discovery.
    b.activities = vec![bash("df -h", true, "100%"), bash("ls", true, "")];
    b.reply = Some("The disk is full, which means the upload failed.".into());
    let obs = observations(&b);
    assert_eq!(kinds_titles(&obs)[0].0, Kind::Discovery);
    assert_eq!(obs[0].facts[1], "df -h");
    // Looking around explains nothing; a reply alone is no discovery.
    b.activities = vec![bash("ls -la", true, "")];
    assert!(observations(&b).is_empty());
    b.activities = vec![];
    assert!(observations(&b).is_empty());
}

#[test]
fn the_summary_takes_what_was_said() {
    let mut first = routed(
        &[
            (
                "Ann",
                "remember that the boat is moored at pier 7. Bob knows.",
            ),
            ("Bob", "ok"),
        ],
        "Noted.",
    );
    first.activities = vec![
        bash("cat notes.md", true, ""),
        bash("grep -r boat .", true, ""),
    ];
    let mut second = routed(
        &[("Bob", "I'll paint the hull on Saturday")],
        "We'll use the blue paint.",
    );
    second.activities = vec![ActivityInput {
        tool: "Write".into(),
        files_modified: vec!["/workspace/group/boat.md".into()],
        ok: true,
        ..ActivityInput::default()
    }];
    let private = BatchInput::default();
    let s = summary(&[private, first, second]);
    assert_eq!(
        s.request,
        "Ann: remember that the boat is moored at pier 7. Bob knows."
    );
    assert_eq!(s.title, "remember that the boat is moored at pier 7");
    assert_eq!(s.investigated, "grep -r boat .");
    assert_eq!(s.learned, "the boat is moored at pier 7");
    assert_eq!(s.completed, "We'll use the blue paint\nChanged boat.md");
    assert_eq!(s.next_steps, "I'll paint the hull on Saturday");
    assert_eq!(summary(&[]), SummaryDraft::default());
}

const FIXTURES: [&str; 5] = [
    "ccl-claude-p-94604a7b.jsonl",
    "ccl-v1.0.51-summary-lines-37f83ec9.jsonl",
    "spotter-auto-compact-4d5611e5.jsonl",
    "spotter-short.jsonl",
    "spotter-tool-heavy.jsonl",
];

/// Every text observation is a piece of what was said in its batch,
/// and the agent's narration of its own work is never taken for a
/// decision or a commitment.
fn check_sensible(b: &BatchInput, obs: &[ObservationDraft]) {
    let said = letters(&format!(
        "{}\n{}",
        b.prompt,
        b.reply.as_deref().unwrap_or("")
    ));
    for o in obs {
        assert!(!o.title.trim().is_empty(), "{o:?}");
        assert!(o.title.chars().count() <= MAX_TITLE, "{o:?}");
        assert!((1..=10).contains(&o.importance), "{o:?}");
        assert!(o.concerns.is_empty(), "nobody routed: {o:?}");
        if o.kind != Kind::Change && !(o.kind == Kind::Bugfix && o.title.ends_with("succeeded")) {
            assert!(said.contains(&letters(&o.title)), "invented: {o:?}");
        }
        let lower = o.title.to_lowercase();
        for narration in [
            "let me",
            "let's check",
            "let's run",
            "let's test",
            "i'll examine",
            "now i",
        ] {
            assert!(!lower.starts_with(narration), "narration kept: {o:?}");
        }
    }
}

#[test]
fn fixture_transcripts_give_sensible_text_observations() {
    use g2_core::transcript::{Entry, parse_file};
    for name in FIXTURES {
        let t = parse_file(&fixtures().join(name)).unwrap();
        let mut batches: Vec<BatchInput> = Vec::new();
        for e in &t.entries {
            match e {
                Entry::User(_) => batches.push(BatchInput {
                    prompt_number: batches.len() as i64 + 1,
                    prompt: e.text().unwrap(),
                    ..BatchInput::default()
                }),
                Entry::Assistant(_) => {
                    if let Some(b) = batches.last_mut() {
                        let r = b.reply.get_or_insert_with(String::new);
                        r.push_str("\n\n");
                        r.push_str(&e.text().unwrap());
                    }
                }
                Entry::Compaction(_) => {}
            }
        }
        assert!(!batches.is_empty(), "{name}");
        for b in &batches {
            check_sensible(b, &observations(b));
        }
        let s = summary(&batches);
        let first = t.first_prompt().unwrap();
        assert!(
            !s.title.is_empty() && s.title.chars().count() <= MAX_SUMMARY_TITLE,
            "{name}"
        );
        assert!(s.request.chars().count() <= MAX_REQUEST, "{name}");
        assert!(
            letters(first).starts_with(&letters(&s.request)),
            "{name}: {s:?}"
        );
    }
}

#[test]
fn fixture_sessions_with_their_tool_calls() {
    for name in FIXTURES {
        for b in &captured(name) {
            check_sensible(b, &observations(b));
        }
    }

    // claude-code-log: the user asked to replace the session navigation
    // with a link; the agent edited the renderer, the template and the
    // styles, found why its new test failed, and fixed it.
    let bs = captured("ccl-v1.0.51-summary-lines-37f83ec9.jsonl");
    let obs: Vec<ObservationDraft> = bs.iter().flat_map(observations).collect();
    let changed: Vec<&str> = obs
        .iter()
        .filter(|o| o.kind == Kind::Change)
        .flat_map(|o| o.files.iter().map(String::as_str))
        .collect();
    for f in [
        "claude_code_log/renderer.py",
        "templates/transcript.html",
        "test/test_combined_transcript_link.py",
    ] {
        assert!(
            changed.iter().any(|c| c.ends_with(f)),
            "{f} not in {changed:?}"
        );
    }
    assert!(obs.iter().any(|o| {
        o.kind == Kind::Discovery
            && o.title
                .starts_with("The issue is that the HTML doesn't contain")
    }));
    assert!(
        obs.iter()
            .any(|o| o.kind == Kind::Bugfix && o.facts[0].starts_with("uv run pytest"))
    );
    let s = summary(&bs);
    assert_eq!(
        s.request,
        "Hey Claude, please have a look at the git diff of claude_code_log/renderer.py and explain what does _get_enhanced_session_navigation and _generate_html_with_navigation do"
    );
    assert!(
        s.investigated
            .starts_with("git diff claude_code_log/renderer.py"),
        "{s:?}"
    );
    assert!(s.completed.contains("Changed renderer.py"), "{s:?}");
    assert!(s.learned.contains("The issue is that"), "{s:?}");
    assert!(s.next_steps.is_empty(), "{s:?}");

    // spotter: a bead worked through with bd and mix, what Dialyzer
    // showed about an error's shape found on the way.
    let bs = captured("spotter-auto-compact-4d5611e5.jsonl");
    let s = summary(&bs);
    assert_eq!(s.title, "Work on bead spotter-dov");
    assert!(
        s.investigated.starts_with("bd show spotter-dov\nbd ready"),
        "{s:?}"
    );
    assert!(
        s.learned.contains("Dialyzer says LLMChain.run returns"),
        "{s:?}"
    );
    assert!(s.completed.contains("session_live.ex"), "{s:?}");

    // A session whose only commands were rejected learns nothing.
    let s = summary(&captured("spotter-short.jsonl"));
    assert_eq!(s.request, "mix phx.server doesnt seem to start");
    assert!(s.learned.is_empty() && s.completed.is_empty(), "{s:?}");
}
