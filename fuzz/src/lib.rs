//! The bodies of g2's fuzz targets: each hands arbitrary bytes to one of
//! the parsers that read what g2 does not control, and asserts what must
//! hold for every input. Any panic is a bug.
//!
//! `fuzz_targets/*.rs` call these under libFuzzer; the integration tests
//! (`tests/integration/corpus.rs`) include this file and replay every file
//! of `fuzz/corpus/{target}/` through the same function, so an input that
//! once crashed stays fixed. It therefore uses only what g2-host's tests can
//! use too: g2-core, g2-host, serde_json, chrono and memchr.

use std::io::Read;

use g2_core::archive::{self, ArchiveOptions};
use g2_core::privacy::{self, Redactor};
use g2_core::transcript::{self, Entry, Transcript};
use g2_core::wire::{Action, AgentEvent, HookInput};
use g2_host::api::{ClearBody, NewGroupBody, ResumeBody};
use g2_host::gateway::offline::{self, Block};
use g2_host::groups::NewGroup;
use g2_host::memory::context;
use g2_host::memory::recall::RecallHit;
use g2_host::messages::{CheckInbound, Inbound, MAX_TEXT};
use serde_json::Value;

/// A fuzz target: its name and its body.
pub type Target = (&'static str, fn(&[u8]));

/// The fuzz targets, by name (the folders of `fuzz/corpus/`).
pub const TARGETS: &[Target] = &[
    ("transcript", transcript),
    ("ipc_request", ipc_request),
    ("hook_input", hook_input),
    ("output_frames", output_frames),
    ("api_body", api_body),
    ("offline_model", offline_model),
    ("privacy", privacy),
    ("memory_block", memory_block),
];

/// Splits off the first byte, which some targets use to pick a variant.
fn selector(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((b, rest)) => (*b, rest),
        None => (0, data),
    }
}

/// A reader that hands out at most `step` bytes a read, so that lines and
/// frames cross every possible chunk boundary.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Transcript bytes → parse → render. The streaming reader (any chunking,
/// any line limit) agrees with the in-memory parser; turns keep their
/// shape; the archive is well formed.
pub fn transcript(data: &[u8]) {
    let t = transcript::parse_bytes(data);
    check_turns(&t);

    let whole = transcript::parse_reader(data, transcript::DEFAULT_MAX_LINE)
        .expect("reading memory never fails");
    assert_eq!(whole.entries, t.entries);
    assert_eq!(whole.summaries, t.summaries);
    assert_eq!(whole.stats.oversized, 0);
    assert_eq!(
        (
            whole.stats.lines,
            whole.stats.malformed,
            whole.stats.skipped,
            whole.stats.duplicates
        ),
        (
            t.stats.lines,
            t.stats.malformed,
            t.stats.skipped,
            t.stats.duplicates
        )
    );

    // A short line limit and a trickling reader: lines over the limit are
    // counted and dropped, every other line is parsed as if read whole.
    let (b, _) = selector(data);
    let max_line = usize::from(b % 64) * 4;
    let step = usize::from(b / 64) * 3 + 1;
    let limited = transcript::parse_reader(Trickle { data, step }, max_line)
        .expect("reading memory never fails");
    let mut lines: Vec<&[u8]> = data.split(|c| *c == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let (long, short): (Vec<&[u8]>, Vec<&[u8]>) =
        lines.into_iter().partition(|l| l.len() > max_line);
    let expected = transcript::parse_bytes(&short.join(&b'\n'));
    assert_eq!(limited.stats.oversized, long.len() as u64);
    assert_eq!(limited.entries, expected.entries);

    let now =
        chrono::DateTime::parse_from_rfc3339("2026-01-02T03:04:05+01:00").expect("a valid date");
    let title = archive::title(None, &t, &now);
    assert!(
        !title.is_empty() && !title.contains('\n'),
        "title {title:?}"
    );
    assert!(
        title.chars().count() <= 81,
        "title {title:?} is shortened to 80 characters and …"
    );
    let opts = ArchiveOptions {
        assistant_name: "G2".into(),
        max_message_chars: 40,
        ..ArchiveOptions::default()
    };
    let md = archive::render(
        &title,
        &t,
        &now.with_timezone(&archive::dates::Tz::UTC),
        &opts,
    );
    assert!(md.starts_with("# "));
    assert_eq!(
        md.lines().next(),
        Some(format!("# {}", title.trim()).trim_end())
    );
    assert!(md.matches("**User**: ").count() >= t.user_turns());
    assert!(md.matches("**G2**: ").count() >= t.assistant_turns());
    let stem = archive::stem(&title, &now);
    assert!(
        !stem.is_empty()
            && stem
                .bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    );
    assert!(
        !stem.starts_with('-') && !stem.ends_with('-'),
        "stem {stem:?}"
    );
}

fn check_turns(t: &Transcript) {
    for pair in t.entries.windows(2) {
        let same = matches!(
            (&pair[0], &pair[1]),
            (Entry::User(_), Entry::User(_)) | (Entry::Assistant(_), Entry::Assistant(_))
        );
        assert!(!same, "consecutive messages of one role are one turn");
    }
    for e in &t.entries {
        if let Entry::User(parts) | Entry::Assistant(parts) = e {
            assert!(!parts.is_empty());
            for p in parts {
                assert!(!p.is_empty() && p.trim() == p, "part {p:?}");
            }
        }
    }
    let s = &t.stats;
    assert!(s.malformed + s.skipped + s.duplicates <= s.lines, "{s:?}");
}

/// An IPC request file, as found in `messages/` and in `tasks/`: what
/// parses is allowed where it was found and reads back the same once
/// written again.
pub fn ipc_request(data: &[u8]) {
    for sub in [g2_core::ipc::MESSAGES_DIR, g2_core::ipc::TASKS_DIR] {
        let Ok((req, named)) = g2_host::requests::parse_request(data, sub) else {
            continue;
        };
        if sub == g2_core::ipc::MESSAGES_DIR {
            assert!(matches!(req.action, Action::SendMessage { .. }));
        }
        if matches!(req.action, Action::ScheduleTask { .. }) {
            assert_eq!(
                named, None,
                "schedule_task names its group in its own field"
            );
        }
        let back = serde_json::to_vec(&req).expect("requests serialize");
        let (again, _) =
            g2_host::requests::parse_request(&back, sub).expect("a written request reads back");
        assert_eq!(again, req);
    }
}

const HOOK_EVENTS: &[&str] = &[
    "PreCompact",
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "PostToolUse",
    "Stop",
];

/// Claude Code's hook JSON (first byte: the event). Never fails; only
/// PreCompact takes a transcript; the archive notice the runner writes
/// from it is one the host reads.
pub fn hook_input(data: &[u8]) {
    let (b, raw) = selector(data);
    let event = HOOK_EVENTS[usize::from(b) % HOOK_EVENTS.len()];
    let h = HookInput::parse(event, raw);
    if event != "PreCompact" {
        assert!(h.transcript_path.is_none() && h.trigger.is_none());
    }
    let notice = AgentEvent::Archive {
        path: "conversations/2026-01-02-x.md".into(),
        title: "x".into(),
        session_id: h.session_id.clone(),
        compact_trigger: h.trigger.clone(),
    };
    let text = serde_json::to_string(&notice).expect("notices serialize");
    match serde_json::from_str::<AgentEvent>(&text).expect("the host reads what the runner writes")
    {
        AgentEvent::Archive {
            session_id,
            compact_trigger,
            ..
        } => assert_eq!((session_id, compact_trigger), (h.session_id, h.trigger)),
        other => panic!("read back as {other:?}"),
    }
}

/// A container's stdout (first byte: the chunk size). The frames found do
/// not depend on how the output was split into chunks, the buffer keeps at
/// most a partial frame, and every frame survives a round trip.
pub fn output_frames(data: &[u8]) {
    use g2_core::wire::{OUTPUT_END, OUTPUT_START};
    use g2_host::agent::take_frames;
    use memchr::memmem;
    let (b, out) = selector(data);
    let mut whole_buf = out.to_vec();
    let whole = take_frames(&mut whole_buf);

    let mut buf = Vec::new();
    let mut chunked = Vec::new();
    for chunk in out.chunks(usize::from(b) + 1) {
        buf.extend_from_slice(chunk);
        chunked.extend(take_frames(&mut buf));
        // Only a partial frame is kept: the buffer starts with a marker
        // (and holds no end marker), or holds less than one.
        if let Some(body) = buf.strip_prefix(OUTPUT_START.as_bytes()) {
            assert!(
                memmem::find(body, OUTPUT_END.as_bytes()).is_none(),
                "a complete frame was left"
            );
        } else {
            assert!(buf.len() <= OUTPUT_START.len(), "noise is dropped");
        }
    }
    assert_eq!(whole, chunked);
    assert_eq!(whole_buf, buf);
    for f in whole {
        let mut again = f.frame().into_bytes();
        assert_eq!(take_frames(&mut again), vec![f]);
    }
}

/// The JSON bodies of the HTTP API (first byte: which), deserialized as
/// axum does and checked as their handlers do before anything is stored:
/// what passes keeps the documented limits.
pub fn api_body(data: &[u8]) {
    let (b, body) = selector(data);
    match b % 4 {
        0 => {
            let Ok(nb) = serde_json::from_slice::<NewGroupBody>(body) else {
                return;
            };
            let Ok(g) = NewGroup::from(nb).into_group("G2") else {
                return;
            };
            assert!(g2_core::validate::group_folder(&g.folder).is_ok());
            assert!(
                !g.name.is_empty()
                    && g.name.trim() == g.name
                    && !g.name.contains('\n')
                    && g.name.chars().count() <= 200
            );
            assert!(!g.jid.trim().is_empty() && g.jid.len() <= 512);
            assert!(g.trigger_pattern.is_some(), "a group always has a trigger");
        }
        1 => {
            let Ok(m) = serde_json::from_slice::<Inbound>(body) else {
                return;
            };
            if m.check().is_ok() {
                assert!(!m.sender.trim().is_empty() && m.sender.len() <= 200);
                assert!(!m.text.trim().is_empty() && m.text.len() <= MAX_TEXT);
            }
        }
        2 => {
            let Ok(c) = serde_json::from_slice::<ClearBody>(body) else {
                return;
            };
            check_session_name(&c.name);
        }
        _ => {
            let Ok(r) = serde_json::from_slice::<ResumeBody>(body) else {
                return;
            };
            if let Some(name) = &r.save_as {
                check_session_name(name);
            }
        }
    }
}

fn check_session_name(name: &str) {
    let Ok(clean) = g2_host::sessions::clean_name(name) else {
        return;
    };
    assert!(!clean.is_empty() && clean.chars().count() <= 200);
    assert!(
        !clean.contains("  ") && clean.trim() == clean && !clean.contains('\n'),
        "{clean:?}"
    );
    assert_eq!(
        g2_host::sessions::clean_name(&clean).ok().as_deref(),
        Some(clean.as_str()),
        "cleaning is idempotent"
    );
}

/// The offline model: the bytes as a prompt (command lines) and as a
/// Messages API request. Answers are well formed and deterministic, and
/// their streamed form carries the same text.
pub fn offline_model(data: &[u8]) {
    let prompt = String::from_utf8_lossy(data);
    let commands = offline::parse_commands(&prompt);
    assert!(commands.len() <= prompt.lines().count());

    let Ok(req) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(a) = offline::answer(&req) else { return };
    assert!(!a.blocks.is_empty());
    let tool_use = matches!(a.blocks.last(), Some(Block::ToolUse { .. }));
    assert_eq!(
        a.stop_reason,
        if tool_use { "tool_use" } else { "end_turn" }
    );
    let again = offline::answer(&req).expect("the same request gets the same answer");
    assert_eq!(without_ids(&again.blocks), without_ids(&a.blocks));

    let msg = offline::to_message(&a, "msg_1", "m", 1);
    assert_eq!(
        msg["content"].as_array().map(Vec::len),
        Some(a.blocks.len())
    );
    let events = offline::to_events(&a, "msg_1", "m", 1);
    let mut streamed = String::new();
    for e in &events {
        let data = e
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .expect("every event has data");
        let v: Value = serde_json::from_str(data).expect("event data is JSON");
        if let Some(t) = v["delta"]["text"].as_str() {
            streamed.push_str(t);
        }
    }
    let texts: String = a
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            Block::ToolUse { .. } => None,
        })
        .collect();
    assert_eq!(streamed, texts);
}

fn without_ids(blocks: &[Block]) -> Vec<Block> {
    blocks
        .iter()
        .map(|b| match b {
            Block::ToolUse { name, input, .. } => Block::ToolUse {
                id: String::new(),
                name: name.clone(),
                input: input.clone(),
            },
            other => other.clone(),
        })
        .collect()
}

/// Text on its way to storage (first byte: a private tag's spelling, how
/// deep a JSON secret is escaped and the encoding of a credential).
/// Cleaning never panics; stripping tags never grows text; redacting again
/// changes nothing; and a mark planted in a private span (in that
/// spelling, or with escaped angle brackets, around the input), as an
/// assigned password (in JSON escaped to that depth, after the input) or a
/// host credential in that encoding (base64 at each alignment, percent,
/// hex, spaced, split) never survives, whatever the input around it.
pub fn privacy(data: &[u8]) {
    let (b, raw) = selector(data);
    let text = String::from_utf8_lossy(raw);
    let r = Redactor::with_literals([CREDENTIAL]);
    let cleaned = r.clean(&text).into_owned();
    assert_eq!(r.redact(&cleaned), cleaned, "redaction is stable");
    assert!(privacy::strip_tags(&text).len() <= text.len());
    // A mark the input itself holds is no planted one.
    if text.contains("MARK-") {
        return;
    }

    let open = [
        "<private>",
        "<private >",
        "<Private note=\"x\">",
        "<PRIVATE\n>",
        "<private a='1>2'>",
        "<g2-memory source=\"recall\">",
    ][usize::from(b % 6)];
    let name = &open[1..open.find([' ', '>', '\n']).unwrap_or(open.len())];
    let close = ["</private>", "</ private >"][usize::from(b / 6 % 2)]
        .replace("private", &name.to_ascii_lowercase());
    let spanned = format!("{text}{open}PRIVATE-MARK-71{text}{close}{text}");
    let cleaned = r.clean(&spanned);
    assert!(
        !cleaned.contains("PRIVATE-MARK-71"),
        "{spanned:?} -> {cleaned:?}"
    );

    let mut secret =
        serde_json::json!({ "user": "ann", "password": format!("SECRET-MARK-93{text}") })
            .to_string();
    for _ in 0..b / 12 % 5 {
        secret = serde_json::to_string(&secret).expect("a string serializes");
    }
    let assigned = format!("{text} {secret}");
    let cleaned = r.clean(&assigned);
    assert!(
        !cleaned.contains("SECRET-MARK-93"),
        "{assigned:?} -> {cleaned:?}"
    );

    // A private span with escaped angle brackets.
    let (lt, gt) = [
        ("\\u003c", "\\u003e"),
        ("\\\\\\u003C", "\\\\\\u003E"),
        ("&lt;", "&gt;"),
        ("< ", " >"),
    ][usize::from(b / 24 % 4)];
    let spanned = format!("{text}{lt}private{gt}PRIVATE-MARK-72{text}{lt}/private{gt}{text}");
    let cleaned = r.clean(&spanned);
    assert!(
        !cleaned.contains("PRIVATE-MARK-72"),
        "{spanned:?} -> {cleaned:?}"
    );

    // The literal credential in an encoding: what must be gone of it.
    let (planted, mark) = encoded_credential(CREDENTIAL, b / 2 % 12);
    let around = format!("{text}{planted}{text}");
    let cleaned = r.clean(&around);
    assert!(!cleaned.contains(&mark), "{around:?} -> {cleaned:?}");
}

const CREDENTIAL: &str = "fuzz-literal-credential";

/// `secret` in shape `n` (0-11), and the part of it that no redaction may
/// leave: for base64, the characters of the credential's bytes alone.
fn encoded_credential(secret: &str, n: u8) -> (String, String) {
    use base64::Engine as _;
    let b64 = |s: String, url: bool| match url {
        false => base64::engine::general_purpose::STANDARD.encode(s),
        true => base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s),
    };
    let whole = |s: String| (s.clone(), s);
    match n {
        0 => whole(secret.to_string()),
        1..=6 => {
            let pre = &"ab"[..usize::from(n - 1) % 3];
            let blob = b64(format!("{pre}{secret}!"), n > 3);
            let mark = blob[4..blob.len() - 4].to_string();
            (blob, mark)
        }
        7 => whole(secret.bytes().map(|c| format!("%{c:02x}")).collect()),
        8 => whole(secret.bytes().map(|c| format!("{c:02X}")).collect()),
        9 => whole(secret.chars().map(|c| format!("{c} ")).collect()),
        10 => whole(format!("{}\n{}", &secret[..9], &secret[9..])),
        _ => whole(format!("{}\\n{}", &secret[..5], &secret[5..])),
    }
}

/// Member names and texts (fields split at `\u{1}`: name, text, name,
/// text, the agent's reply, an observation's title) through the real
/// archive renderer, the passages recall reads and the per-prompt block:
/// the block is one `<g2-memory>` element with no markup inside, and on
/// every line each quote closes, every word outside the quotes is g2's,
/// and a passage names no more people than sent messages and the agent at
/// most once, last.
pub fn memory_block(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut f = text.split('\u{1}');
    let mut field = || f.next().unwrap_or("").to_string();
    let (n1, t1, n2, t2, reply, title) = (field(), field(), field(), field(), field(), field());
    let env = g2_core::envelope::write([
        (n1.as_str(), "2026-11-22T09:00:00.000Z", t1.as_str()),
        (n2.as_str(), "2026-11-22T09:01:00.000Z", t2.as_str()),
    ]);
    let mut t = Transcript::default();
    t.entries = vec![Entry::User(vec![env]), Entry::Assistant(vec![reply])];
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:00:00Z")
        .expect("a time")
        .with_timezone(&archive::dates::Tz::UTC);
    let md = archive::render("t", &t, &at, &ArchiveOptions::default());
    let hit = |kind: &str| RecallHit {
        kind: kind.into(),
        id: 1,
        observation_kind: Some("fact".into()),
        at: "2026-11-22T09:00:00.000Z".into(),
        ..Default::default()
    };
    let cut = |t: &str| t.chars().take(200).collect::<String>();
    let mut lines = String::new();
    for p in g2_host::store::passages::split(&md) {
        lines.push_str(&context::memory_line(&hit("passage"), &p.text, cut));
        lines.push('\n');
    }
    for kind in ["observation", "summary", "prompt"] {
        lines.push_str(&context::memory_line(&hit(kind), &title, cut));
        lines.push('\n');
    }
    let block = context::prompt_block(&lines);
    let body = block
        .strip_prefix("<g2-memory>\n")
        .and_then(|b| b.strip_suffix("</g2-memory>"))
        .unwrap_or_else(|| panic!("not one element: {block:?}"));
    assert!(!body.contains(['<', '>']), "markup inside: {block:?}");
    for line in body.lines().skip(1) {
        let shape = outside_quotes(line).unwrap_or_else(|| panic!("a quote left open: {line:?}"));
        let rest = shape
            .strip_prefix("- [")
            .and_then(|r| r.split_once("] "))
            .unwrap_or_else(|| panic!("not a memory line: {line:?}"));
        assert!(
            rest.0
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ' '),
            "{line:?}"
        );
        let said: Vec<&str> = rest.1.split(" | ").collect();
        let mut people = 0;
        for (i, m) in said.iter().enumerate() {
            match *m {
                "Q" | "the user: Q" | "a compaction summary: Q" => {}
                "the agent: Q" => assert_eq!(i, said.len() - 1, "{line:?}"),
                m if m == "Q: Q" || is_person_at(m) => people += 1,
                m => panic!("{m:?} is not g2's: {line:?}"),
            }
        }
        assert!(people <= 2, "{people} people in {line:?}");
    }
}

/// `line` with every quote (`"…"`) as `Q`; None when one is left open.
fn outside_quotes(line: &str) -> Option<String> {
    let mut out = String::new();
    let mut parts = line.split('"');
    out.push_str(parts.next()?);
    loop {
        match (parts.next(), parts.next()) {
            (None, _) => return Some(out),
            (Some(_), Some(after)) => {
                out.push('Q');
                out.push_str(after);
            }
            (Some(_), None) => return None,
        }
    }
}

/// `Q (HH:MM): Q`.
fn is_person_at(m: &str) -> bool {
    m.strip_prefix("Q (")
        .and_then(|r| r.strip_suffix("): Q"))
        .is_some_and(|t| t.len() == 5 && t.as_bytes()[2] == b':')
}
