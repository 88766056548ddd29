//! The tool calls: files changed, commands that failed then worked, and
//! what the commands showed.

use std::sync::LazyLock;

use regex::Regex;

use super::*;

pub(super) const EDIT_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];
/// Commands that only look around: running them explains nothing.
pub(super) const LOOKING: &[&str] = &[
    "ls", "pwd", "cd", "echo", "cat", "which", "true", "clear", "head", "tail", "wc", "date",
    "whoami", "env", "tree",
];
/// A reply sentence that names a cause: preferred over a mere "because".
pub(super) static CAUSE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:caused\s+by|the\s+cause|root\s+cause|turns\s+out|the\s+(?:problem|issue|reason|error|culprit|fix)\s+(?:is|was))\b",
    )
});
/// A reply sentence that explains a result.
pub(super) static EXPLAINS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:because|caused\s+by|the\s+cause|root\s+cause|turns\s+out|the\s+(?:problem|issue|reason|error|culprit)\s+(?:is|was)|(?:this|that|which)\s+means|shows\s+that|found\s+that|was\s+due\s+to|is\s+due\s+to|fails?\s+(?:because|when|since)|the\s+fix\s+(?:is|was))\b",
    )
});

pub(super) fn command(a: &ActivityInput) -> Option<String> {
    (a.tool == "Bash")
        .then(|| a.input.get("command").and_then(|c| c.as_str()))
        .flatten()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|c| !c.is_empty())
}

/// A command that does more than look around.
pub(super) fn telling(cmd: &str) -> bool {
    let first = cmd.split_whitespace().next().unwrap_or("");
    !LOOKING.contains(&first)
}

/// A path as the group sees it: its own folder's prefix off.
pub(super) fn short_path(p: &str) -> &str {
    p.strip_prefix("/workspace/group/").unwrap_or(p)
}

/// One `change` for the files the batch's edits changed.
pub(super) fn change(activities: &[ActivityInput], senders: &[String]) -> Option<ObservationDraft> {
    let mut files: Vec<String> = Vec::new();
    for a in activities
        .iter()
        .filter(|a| a.ok && EDIT_TOOLS.contains(&a.tool.as_str()))
    {
        for f in &a.files_modified {
            if !files.contains(f) {
                files.push(f.clone());
            }
        }
    }
    if files.is_empty() {
        return None;
    }
    let names: Vec<&str> = files.iter().map(|f| short_path(f)).collect();
    // The title names the files; the facts and files say where they are.
    let base: Vec<&str> = names
        .iter()
        .map(|n| n.rsplit('/').next().unwrap_or(n))
        .collect();
    let title = shorten(&format!("Changed {}", base.join(", ")), MAX_TITLE);
    Some(ObservationDraft {
        kind: Kind::Change,
        narrative: format!("Changed {}.", names.join(", ")),
        facts: names.iter().map(ToString::to_string).collect(),
        title,
        files,
        importance: 4,
        concerns: senders.to_vec(),
    })
}

/// A command that failed and later succeeded, as the same command.
pub(super) fn bugfix(
    activities: &[ActivityInput],
    reply: &[String],
    senders: &[String],
) -> Option<ObservationDraft> {
    let (failed_at, cmd, fixed_at) = activities.iter().enumerate().find_map(|(i, a)| {
        let cmd = command(a).filter(|_| !a.ok)?;
        let later = activities[i + 1..]
            .iter()
            .position(|b| b.ok && command(b).as_deref() == Some(cmd.as_str()))?;
        Some((i, cmd, i + 1 + later))
    })?;
    let error = activities[failed_at]
        .output
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| shorten(l, MAX_TITLE));
    let mut files: Vec<String> = Vec::new();
    for a in &activities[failed_at..fixed_at] {
        for f in &a.files_modified {
            if !files.contains(f) {
                files.push(f.clone());
            }
        }
    }
    let why = explanation(reply);
    let title = match why {
        Some(s) => shorten(&tidy(s), MAX_TITLE),
        None => shorten(&format!("{cmd} failed, then succeeded"), MAX_TITLE),
    };
    let mut facts = vec![cmd.clone()];
    facts.extend(error);
    facts.extend(files.iter().map(|f| short_path(f).to_string()));
    Some(ObservationDraft {
        kind: Kind::Bugfix,
        narrative: match why {
            Some(s) => format!(
                "{cmd} failed, then succeeded. {}",
                shorten(s, MAX_NARRATIVE)
            ),
            None => format!("{cmd} failed, then succeeded."),
        },
        title,
        facts,
        files,
        importance: 5,
        concerns: senders.to_vec(),
    })
}

/// The reply's sentence that explains: the first naming a cause, else the
/// first with a "because".
pub(super) fn explanation(reply: &[String]) -> Option<&String> {
    let told = |s: &&String| !s.ends_with('?');
    reply
        .iter()
        .filter(told)
        .find(|s| CAUSE.is_match(s))
        .or_else(|| reply.iter().filter(told).find(|s| EXPLAINS.is_match(s)))
}

/// The reply's explanation of what the batch's commands showed, with the
/// commands as its facts.
pub(super) fn discovery(
    activities: &[ActivityInput],
    reply: &[String],
    senders: &[String],
) -> Option<ObservationDraft> {
    let mut cmds: Vec<String> = Vec::new();
    for c in activities.iter().filter_map(command).filter(|c| telling(c)) {
        if !cmds.contains(&c) {
            cmds.push(c);
        }
    }
    if cmds.is_empty() {
        return None;
    }
    let why = explanation(reply)?;
    let title = shorten(&tidy(why), MAX_TITLE);
    let mut facts = vec![title.clone()];
    facts.extend(cmds.iter().take(5).map(|c| shorten(c, MAX_TITLE)));
    let mut files: Vec<String> = Vec::new();
    for a in activities {
        for f in a.files_read.iter().chain(&a.files_modified) {
            if !files.contains(f) {
                files.push(f.clone());
            }
        }
    }
    Some(ObservationDraft {
        kind: Kind::Discovery,
        title,
        narrative: shorten(why, MAX_NARRATIVE),
        facts,
        files,
        importance: 5,
        concerns: senders.to_vec(),
    })
}
