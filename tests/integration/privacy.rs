//! What is private or looks like a secret leaves no trace in g2's storage,
//! with real Docker, the real Claude Code, the offline model and `g2
//! serve`: private spans in every spelling of their tags and a password in
//! JSON escaped twice go to the agent, into a tool's output and back in
//! its replies, are captured, extracted, summarised and archived — and
//! afterwards no file of the home holds them (the database, its WAL and
//! shared memory, archives, IPC files, the host's log), but Claude Code's
//! own transcripts, which keep the conversation for the agent to resume.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::channel_support::stored_texts;
use crate::support::*;

const NEEDLES: &[&str] = &[
    "PIN-4417-AA",
    "PIN-5528-BB",
    "PIN-6639-CC",
    "ESC-SECRET-4242",
    "ESC-SECRET-5353",
];

/// Claude Code's transcripts of the group's sessions: the conversation as
/// the agent had it, which g2 never writes (docs/claude-code.md).
pub(crate) fn is_transcript(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "projects")
        && p.extension().is_some_and(|e| e == "jsonl")
}

/// Every regular file under `dir`, links not followed.
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

/// Waits (at most 90 s) until the last session in a group's memory at
/// `base` (`…/api/groups/{folder}/memory`, asked with the API `token`
/// when there is one) has its summary.
pub(crate) async fn wait_last_summary(base: &str, token: Option<&str>) {
    let get = |path: String| {
        let req = http_client().get(format!("{base}{path}"));
        match token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    };
    let sessions = shared::json_of(get("/sessions".into())).await;
    let sid = sessions[sessions.as_array().unwrap().len() - 1]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = get(format!("/sessions/{sid}/summary"))
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no summary of {sid}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Every regular file under `dir` (links not followed) holding one of
/// `needles`, as bytes.
fn holding(dir: &Path, needles: &[&str]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for p in files_under(dir) {
        let bytes = std::fs::read(&p).unwrap_or_default();
        for n in needles {
            if bytes.windows(n.len()).any(|w| w == n.as_bytes()) {
                out.push((p.clone(), n.to_string()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_spans_and_escaped_secrets_leave_no_trace_in_the_home() {
    if !image_ready() {
        return;
    }
    let home = TestHome::new();
    let s = serve(&home, &[("G2_MEMORY__PROCESS_INTERVAL_SECS", "1")]);
    let mut main = Sse::open(&s.url, "main", None).await;
    post(
        &s.url,
        "main",
        "Ann",
        "remember that the boat is moored at pier 7 <private note=\"pin\">PIN-4417-AA</private> \
         and <PRIVATE >PIN-5528-BB</private > and <private\nlang=\"en\">PIN-6639-CC</ private>",
    )
    .await;
    let first = main.reply(120).await;
    // The agent had them: the offline model repeats what it received.
    assert!(
        first.contains("PIN-4417-AA") && first.contains("PIN-6639-CC"),
        "{first}"
    );
    // A password in JSON escaped twice, in the prompt and in a tool's output.
    post(
        &s.url,
        "main",
        "Ann",
        r#"g2:bash echo '{\"cmd\":\"{\\\"password\\\":\\\"ESC-SECRET-4242\\\"}\"}' '{\"token\":\"ESC-SECRET-5353\"}'"#,
    )
    .await;
    let second = main.reply(120).await;
    assert!(
        second.contains("ESC-SECRET-4242"),
        "the tool printed it: {second}"
    );
    // Extraction has worked on the prompts, then the session is archived
    // and summarised.
    let base = format!("{}/api/groups/main/memory", s.url);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let obs = get_json(&format!("{base}/observations")).await;
        if obs.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "no observation: {obs}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    post(&s.url, "main", "Bob", "g2:clear Boat").await;
    let cleared = main.reply(120).await;
    assert!(cleared.contains("bookmarked"), "{cleared}");
    wait_last_summary(&base, None).await;
    // What the log keeps of the conversation is clean, and still says
    // what was said.
    let texts = stored_texts(&s.url, "main").await;
    assert!(texts.iter().any(|t| t.contains("pier 7")), "{texts:?}");
    assert!(
        texts.iter().any(|t| t.contains("[redacted:assignment]")),
        "{texts:?}"
    );
    // Nothing of it in any file of the home: the database, its WAL (which
    // the host truncates after cleaning) and everything else.
    let deadline = Instant::now() + Duration::from_secs(20);
    let left = loop {
        let left: Vec<_> = holding(home.path(), NEEDLES)
            .into_iter()
            .filter(|(p, _)| !is_transcript(p))
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(left, Vec::<(PathBuf, String)>::new());
    // The search sees them where they are: in Claude Code's transcript.
    let transcripts: Vec<String> = holding(home.path(), NEEDLES)
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    for n in NEEDLES {
        assert!(transcripts.iter().any(|t| t == n), "{n} not found anywhere");
    }
    // The archive says what was said, without them.
    let archives = home.archives("main");
    let md = std::fs::read_to_string(&archives[0]).unwrap();
    assert!(
        md.contains("pier 7") && md.contains("[redacted:assignment]"),
        "{md}"
    );
    let _: Value = get_json(&format!("{}/api/groups/main/status", s.url)).await;
}
