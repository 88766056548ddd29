//! The offline extractor: deterministic, no model, no account.
//!
//! It reads what was said sentence by sentence and keeps the sentences
//! that say something worth remembering, as said: every title and fact is
//! a trimmed piece of the captured text (markdown noise stripped, a
//! "remember that" lead dropped), never words of its own. The rules, in
//! the order they are tried on each sentence:
//!
//! | what was said (by people) | kind | importance |
//! |---|---|---|
//! | "remember (that) …", "note that …", "don't forget …" | `fact`, the statement without its lead | 8 |
//! | "remember to …", "don't forget to …" | `todo` | 7 |
//! | "X is my wife/boss/friend …", "my sister is X", "I'm X, the …" | `person` | 6 |
//! | "I/we always/usually/never/prefer/like/love/hate/don't like …" | `preference` | 6 |
//! | "we'll / let's / we decided / we agreed / going with …" | `decision` | 7 |
//! | "I'll / I will / remind me / todo / I need to / we have to …" | `todo` | 7 |
//! | "my X is …", "our X is …", "X is at/in/on …", "Ann's X is …" | `fact` | 6 |
//!
//! The reply is the agent's: of it only decisions ("we'll use …", not
//! "let's look at the file", which narrates the work) and commitments with
//! a time ("I'll remind you tomorrow") are kept, and, when the batch ran
//! shell commands, the sentence that explains what they showed ("… because
//! …", "the problem was …") as a `discovery` (5) whose facts are the
//! commands. Questions state nothing and are skipped (except "remember …"
//! and "remind me …", which are requests however they are punctuated).
//!
//! From the tool calls: the files a Write/Edit/MultiEdit/NotebookEdit
//! changed, as one `change` (4) per batch titled "Changed" and their names
//! (the one title not said by anyone: it lists what the tools recorded),
//! and a shell command that failed and later succeeded as the same
//! command, as a `bugfix` (5) titled with the reply's explanation when it
//! gives one. Commands that only look around (`ls`, `cat`, `pwd`, …) never
//! make a discovery.
//!
//! People's sentences concern their sender (a routed prompt is `Name: text`
//! lines, [`BatchInput::senders`] naming who may speak); the reply's and
//! the tools' concern every sender of the batch. Duplicates within a batch
//! (same kind, same title) are merged, their concerns joined. Output order
//! is the text's order, so the same batch always gives the same drafts.
//!
//! The summary is extractive too: the first prompt as the request, the
//! commands run and files read as what was investigated, the facts and
//! discoveries of all batches (most important first) as what was learned,
//! changes and decisions as what was completed, todos as next steps.

use std::sync::LazyLock;

use regex::Regex;

use g2_core::envelope;

use g2_core::validate::GroupFolder;

use super::{
    ActivityInput, BatchInput, Extracted, Extractor, Kind, ObservationDraft, SummaryDraft,
};

/// Rules over the captured text (see the module doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl Extractor for Offline {
    fn observations<'a>(
        &'a self,
        _group: &'a GroupFolder,
        batch: &'a BatchInput,
    ) -> Extracted<'a, Vec<ObservationDraft>> {
        Box::pin(std::future::ready(Ok(observations(batch))))
    }

    fn summary<'a>(
        &'a self,
        _group: &'a GroupFolder,
        batches: &'a [BatchInput],
    ) -> Extracted<'a, SummaryDraft> {
        Box::pin(std::future::ready(Ok(summary(batches))))
    }
}

/// Longest observation title, in characters.
const MAX_TITLE: usize = 120;
/// Longest summary title.
const MAX_SUMMARY_TITLE: usize = 80;
/// Longest summary request.
const MAX_REQUEST: usize = 300;
/// Longest narrative: the sentence a title was taken from, as said.
const MAX_NARRATIVE: usize = 600;
/// Items a summary field lists at most.
const MAX_ITEMS: usize = 8;

/// Who said a sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    /// A person: the sender of a routed prompt, or whoever typed a prompt
    /// straight to the agent.
    Person,
    /// The agent's reply.
    Agent,
}

/// What the rules made of one sentence.
struct Found {
    kind: Kind,
    importance: u8,
    /// The piece of the sentence that is the title (before shortening).
    title: String,
}

/// The observations of one batch, in the order of the text they come from.
pub fn observations(batch: &BatchInput) -> Vec<ObservationDraft> {
    let mut out = Drafts::default();
    for (who, text) in spoken(&batch.prompt, &batch.senders) {
        let who = who.as_deref();
        let concerns: Vec<String> = who.iter().map(ToString::to_string).collect();
        for sentence in sentences(&text) {
            if let Some(f) = classify(&sentence, Speaker::Person) {
                out.push(draft(f, &sentence, who, concerns.clone()));
            }
        }
    }
    let reply = batch.reply.as_deref().unwrap_or("");
    let reply_sentences = sentences(reply);
    for sentence in &reply_sentences {
        if let Some(f) = classify(sentence, Speaker::Agent) {
            out.push(draft(f, sentence, None, batch.senders.clone()));
        }
    }
    let fixed = bugfix(&batch.activities, &reply_sentences, &batch.senders);
    let found = discovery(&batch.activities, &reply_sentences, &batch.senders);
    // The explanation of a fix is told once, as the fix.
    if let Some(d) = found.filter(|d| fixed.as_ref().is_none_or(|b| b.title != d.title)) {
        out.push(d);
    }
    if let Some(b) = fixed {
        out.push(b);
    }
    if let Some(c) = change(&batch.activities, &batch.senders) {
        out.push(c);
    }
    out.0
}

/// Drafts of a batch, merged by kind and title.
#[derive(Default)]
struct Drafts(Vec<ObservationDraft>);

impl Drafts {
    fn push(&mut self, d: ObservationDraft) {
        let key = d.title.to_lowercase();
        match self
            .0
            .iter_mut()
            .find(|o| o.kind == d.kind && o.title.to_lowercase() == key)
        {
            Some(o) => {
                for c in d.concerns {
                    if !o.concerns.contains(&c) {
                        o.concerns.push(c);
                    }
                }
                o.importance = o.importance.max(d.importance);
            }
            None => self.0.push(d),
        }
    }
}

fn draft(f: Found, sentence: &str, who: Option<&str>, concerns: Vec<String>) -> ObservationDraft {
    let title = shorten(&f.title, MAX_TITLE);
    let said = shorten(sentence, MAX_NARRATIVE);
    // The narrative is the sentence as said, with who said it the way a
    // routed prompt shows it.
    let narrative = match who {
        Some(name) => format!("{name}: {said}"),
        None => said,
    };
    ObservationDraft {
        kind: f.kind,
        facts: vec![title.clone()],
        title,
        narrative,
        files: Vec::new(),
        importance: f.importance,
        concerns,
    }
}

/// The prompt as (sender, text) pieces: a routed prompt's `Name: text`
/// lines by sender (a line that names no sender continues the message
/// before it), anything else as one piece of no one in particular.
fn spoken(prompt: &str, senders: &[String]) -> Vec<(Option<String>, String)> {
    // The worker hands the stored `Name: text` form; an envelope, should
    // one come, is read as the same thing.
    let (prompt, senders): (String, Vec<String>) = match envelope::read(prompt) {
        Some(env) if !env.messages.is_empty() => {
            let mut names: Vec<String> = Vec::new();
            for m in &env.messages {
                if !names.contains(&m.sender) {
                    names.push(m.sender.clone());
                }
            }
            let lines = env
                .messages
                .iter()
                .map(|m| format!("{}: {}", m.sender, m.text))
                .collect::<Vec<_>>()
                .join("\n");
            (lines, names)
        }
        _ => (prompt.to_string(), senders.to_vec()),
    };
    if senders.is_empty() {
        return if prompt.trim().is_empty() {
            Vec::new()
        } else {
            vec![(None, prompt)]
        };
    }
    let mut out: Vec<(Option<String>, String)> = Vec::new();
    for line in prompt.lines() {
        let named = senders.iter().find_map(|s| {
            line.strip_prefix(s.as_str())
                .and_then(|rest| rest.strip_prefix(": "))
                .map(|rest| (s, rest))
        });
        match (named, out.last_mut()) {
            (Some((name, rest)), _) => out.push((Some(name.clone()), rest.to_string())),
            (None, Some((_, text))) => {
                text.push('\n');
                text.push_str(line);
            }
            (None, None) => out.push((None, line.to_string())),
        }
    }
    out
}

// ---- text: markdown out, sentences ----

static LINK: LazyLock<Regex> = LazyLock::new(|| re(r"!?\[([^\]\n]*)\]\([^)\s]*\)"));
static TAG: LazyLock<Regex> = LazyLock::new(|| re(r"</?[A-Za-z][\w:-]*(?:\s[^<>\n]*)?/?>"));
static BULLET: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:[-*+•]\s+|\d{1,3}[.)]\s+)(?:\[[ xX]\]\s+)?"));

fn re(pattern: &str) -> Regex {
    // The patterns are constants: a bad one is a bug the tests catch.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("offline extractor pattern")
}

/// The text's prose lines with markdown noise stripped: code blocks,
/// tables, headings and rules dropped; quote marks, bullets, emphasis,
/// inline code marks, tags and link targets taken off.
fn prose(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence || t.is_empty() || t.starts_with('|') || t.starts_with('#') {
            continue;
        }
        if t.chars().all(|c| matches!(c, '-' | '*' | '_' | '=' | ' ')) {
            continue;
        }
        let t = t.trim_start_matches('>').trim_start();
        let t = BULLET.replace(t, "");
        let t = LINK.replace_all(&t, "$1");
        let t = TAG.replace_all(&t, " ");
        let t: String = t
            .replace("**", "")
            .replace("__", "")
            .chars()
            .filter(|c| *c != '`' && *c != '*')
            .collect();
        let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
        if !t.is_empty() {
            out.push(t);
        }
    }
    out
}

/// The sentences of `text`: each prose line split after `.`, `!` or `?`
/// where a space and no lowercase letter follow (so "e.g. this", "v1.2"
/// and "main.rs" stay whole). Hand-rolled: chat text is short and
/// informal, and a dot before a capital is all the splitting it needs.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut start = 0;
        for (n, &(i, c)) in chars.iter().enumerate() {
            if !matches!(c, '.' | '!' | '?') {
                continue;
            }
            let next = chars.get(n + 1).map(|p| p.1);
            let after = chars.get(n + 2).map(|p| p.1);
            if next == Some(' ') && after.is_some_and(|a| !a.is_lowercase()) {
                let s = line[start..i + c.len_utf8()].trim();
                if !s.is_empty() {
                    out.push(s.to_string());
                }
                start = i + c.len_utf8();
            }
        }
        let s = line[start..].trim();
        if !s.is_empty() {
            out.push(s.to_string());
        }
    }
    out
}

/// Shortens to at most `max` characters, cut at a word where there is one
/// and marked with `…`.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let s = s.trim();
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some(_) => {
            // Room for the mark.
            let end = s.char_indices().nth(max - 1).map_or(s.len(), |(i, _)| i);
            let cut = &s[..end];
            let cut = cut
                .rfind(' ')
                .filter(|&j| j > end / 2)
                .map_or(cut, |j| &cut[..j]);
            format!(
                "{}…",
                cut.trim_end_matches(|c: char| c.is_whitespace() || ",;:-".contains(c))
            )
        }
    }
}

/// A title as said: trailing punctuation off, the first letter kept as it
/// was written.
fn tidy(s: &str) -> String {
    s.trim()
        .trim_end_matches(|c: char| matches!(c, '.' | '!' | ',' | ';' | ':') || c.is_whitespace())
        .trim()
        .to_string()
}

// ---- the sentence rules ----

/// Words that may open a sentence without changing what it says ("oh,",
/// "please", "Andy,", "could you"): taken off before the rules look.
static LEAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:oh|ok|okay|so|and|also|btw|by the way|hey|hi|hello|please|pls|fyi|just|yes|yeah|yep|no|nope|well|alright|right|great|cool|thanks|thank you|(?:can|could|would|will) you(?: please)?)\b[,!:.]?\s+)+",
    )
});
/// A name (or one word) said to someone: "Andy, …".
static VOCATIVE: LazyLock<Regex> = LazyLock::new(|| re(r"^\p{Lu}[\w'’-]*,\s+"));

static REMEMBER_TO: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:remember|don['’]?t forget|do not forget)\s+to\s+\S"));
static REMEMBER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:remember|don['’]?t forget|do not forget|never forget|keep in mind|note|for the record)(?P<that>\s+that\b|\s*[:,])?\s*(?P<x>\S.*)$",
    )
});
/// A statement has a verb: "remember the gate code is 4411", not
/// "remember the milk".
static STATEMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:is|are|was|were|has|have|had|will|won['’]t|can|can['’]t|does|doesn['’]t|do|don['’]t|'s|’s)\b",
    )
});

const RELATION: &str = r"(?:wife|husband|partner|spouse|fianc[eé]e?|boyfriend|girlfriend|boss|manager|friend|best friend|colleague|co-?worker|brother|sister|mother|mom|mum|father|dad|son|daughter|cousin|aunt|uncle|grand(?:ma|mother|pa|father)|neighbou?r|doctor|dentist|teacher|landlord|landlady|flatmate|roommate|assistant|lawyer|accountant|vet|kid|child|niece|nephew|sibling|parent|team lead)s?";

static PERSON: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        // "Tom is my brother", "Tom and Jo are our kids"
        re(&format!(
            r"^\p{{Lu}}[\w'’-]*(?:\s+(?:and\s+)?\p{{Lu}}[\w'’-]*)*\s+(?i:is|are)\s+(?i:my|our)\s+(?:(?i:best|older|younger|little|big|new|old)\s+)?(?i:{RELATION})\b"
        )),
        // "my sister is Jo", "my boss's name is Kim"
        re(&format!(
            r"^(?i:my|our)\s+(?:(?i:best|older|younger|little|big|new|old)\s+)?(?i:{RELATION})(?:['’]s\s+(?i:name))?\s+(?i:is|are)\s+(?:(?i:called|named)\s+)?\p{{Lu}}"
        )),
        // "I'm Ann, the treasurer"
        re(r"^(?i:i['’]m|i am)\s+\p{Lu}[\w'’-]*,\s+(?i:the|a|an|your|their)\s+\w"),
    ]
});

static PREFERENCE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
    [
        re(
            r"(?i)^(?:i|we)\s+(?:(?:really|generally|mostly|also|just|both|all)\s+)?(?:always|usually|normally|typically|never|prefer|like|love|hate|dislike|enjoy|avoid|don['’]?t\s+(?:like|eat|drink|want|use)|do\s+not\s+(?:like|eat|drink|want|use)|can['’]?t\s+(?:stand|eat|drink))\s+(?P<o>\S.*)$",
        ),
        re(r"(?i)^(?:i['’]d|i\s+would|we['’]d|we\s+would)\s+(?:rather|prefer)\s+(?P<o>\S.*)$"),
        re(
            r"(?i)^(?:i['’]m|i\s+am|we['’]re|we\s+are)\s+(?P<o>(?:allergic|vegetarian|vegan|lactose|gluten|intolerant)\b.*)$",
        ),
    ]
});
/// "I like that", "I love you": a reaction, not a preference.
static REACTION: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:it|that|this|them|those|these|you|your|him|her)\b"));

static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:we['’]ll|we\s+will|we\s+shall|let['’]s|let\s+us|(?:we|i)(?:['’]ve|\s+have)?\s+(?:decided|agreed|settled on|chosen|chose)|(?:we['’]re|we\s+are|i['’]m|i\s+am)\s+going\s+with|going\s+with|(?:we['’]ll|i['’]ll|we\s+will|i\s+will)\s+go\s+with|decided|decision\s*:)\s*(?P<r>.*)$",
    )
});
/// What "let's …" / "we'll …" narrates when the agent says it about its
/// own work, and the few that say nothing when people do.
static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:do|see|check|look|try|start|run|read|examine|explore|investigate|verify|test|find|debug|dig|take|first|now|begin|figure|get|go\s+through|review|understand|analy[sz]e|search|inspect|open|also|then|continue|proceed|move|do\s+(?:this|that)|fix|update|create|add|make|write|implement|set|need|want|think|talk|wait)\b",
    )
});
static PEOPLE_FILLER: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:see|think|talk|wait|do\s+(?:this|that|it))\b|^$"));

static TODO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:i['’]ll|i\s+will|remind\s+me|todo\b|to-?do\s*:|(?:i|we)\s+(?:need|have|must|should|ought)\s+to|need\s+to|(?:i|we)\s+must|(?:i['’]m|i\s+am|we['’]re|we\s+are)\s+going\s+to)\s*\S",
    )
});
static REPLY_TODO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:i['’]ll|i\s+will)\s+(?:remind|ping|message|tell|check\s+back|follow\s+up)|^(?:todo|to-?do)\s*:",
    )
});
static WHEN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:tomorrow|tonight|today|(?:by|before|until|on|next|this)\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day|(?:by|before|until)\s+(?:tomorrow|tonight|noon|midnight|next|the\s+end|end\s+of|\d)|next\s+(?:week|month|year|time)|this\s+(?:morning|afternoon|evening|week|weekend|month)|at\s+\d{1,2}(?::\d{2})?\s*(?:am|pm)?|in\s+(?:an?|\d+)\s+(?:minutes?|hours?|days?|weeks?))\b",
    )
});

static MY_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^(?:my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?\s+(?:is|are|was|were)\s+\S")
});
static WHERE_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:the|a|an)\s+)?(?P<s>[\w'’-]+(?:\s+[\w'’-]+){0,4}?)\s+(?:is|are)\s+(?:(?:now|still|currently|usually|always|kept|moored|parked|stored|located|hidden|left)\s+)?(?:at|in|on|under|behind|inside|near|next\s+to|beside)\s+\S",
    )
});
static OWNED_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\p{Lu}[\w-]*['’]s\s+[\w'’-]+(?:\s+[\w'’-]+){0,3}?\s+(?i:is|are|was)\s+\S")
});
/// Subjects that point elsewhere ("it is in …", "this is on …").
static PRONOUN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:it|this|that|there|here|he|she|they|we|i|you|what|which|who|where|everything|something|nothing|anything|one|all)$",
    )
});

/// What kind of thing `sentence` says, if any.
fn classify(sentence: &str, speaker: Speaker) -> Option<Found> {
    let s = lead_off(sentence);
    let question = s.ends_with('?');
    let found = |kind, importance, title: &str| {
        let title = tidy(title);
        (!title.is_empty()).then_some(Found {
            kind,
            importance,
            title,
        })
    };
    if speaker == Speaker::Agent {
        if question {
            return None;
        }
        if let Some(c) = DECISION.captures(s) {
            let rest = c.name("r").map_or("", |m| m.as_str());
            if !PROCESS.is_match(rest) && !rest.is_empty() {
                return found(Kind::Decision, 7, s);
            }
        }
        if REPLY_TODO.is_match(s) && WHEN.is_match(s) {
            return found(Kind::Todo, 7, s);
        }
        return None;
    }
    if REMEMBER_TO.is_match(s) {
        return found(Kind::Todo, 7, s);
    }
    if let Some(c) = REMEMBER.captures(s) {
        let x = c.name("x").map_or("", |m| m.as_str());
        if c.name("that").is_some() || STATEMENT.is_match(x) {
            return found(Kind::Fact, 8, x.trim_end_matches('?'));
        }
    }
    if TODO.is_match(s) && s.to_lowercase().starts_with("remind") {
        return found(Kind::Todo, 7, s.trim_end_matches('?'));
    }
    if question {
        return None;
    }
    if PERSON.iter().any(|p| p.is_match(s)) {
        return found(Kind::Person, 6, s);
    }
    for p in PREFERENCE.iter() {
        if let Some(c) = p.captures(s) {
            let o = c.name("o").map_or("", |m| m.as_str());
            if !REACTION.is_match(o) {
                return found(Kind::Preference, 6, s);
            }
        }
    }
    if let Some(c) = DECISION.captures(s) {
        let rest = c.name("r").map_or("", |m| m.as_str());
        if !PEOPLE_FILLER.is_match(rest) {
            return found(Kind::Decision, 7, s);
        }
    }
    if TODO.is_match(s) {
        return found(Kind::Todo, 7, s);
    }
    if MY_FACT.is_match(s) || OWNED_FACT.is_match(s) {
        return found(Kind::Fact, 6, s);
    }
    if let Some(c) = WHERE_FACT.captures(s) {
        let subject = c.name("s").map_or("", |m| m.as_str());
        if !PRONOUN.is_match(subject) {
            return found(Kind::Fact, 6, s);
        }
    }
    None
}

/// `sentence` without the words that open it and change nothing.
fn lead_off(sentence: &str) -> &str {
    let mut s = sentence.trim();
    loop {
        let before = s.len();
        if let Some(m) = LEAD.find(s) {
            s = &s[m.end()..];
        }
        if let Some(m) = VOCATIVE.find(s) {
            // "Ann, remember …" but not "Yes, …" twice over: one name.
            s = &s[m.end()..];
        }
        if s.len() == before {
            return s;
        }
    }
}

// ---- the tool calls ----

const EDIT_TOOLS: &[&str] = &["Write", "Edit", "MultiEdit", "NotebookEdit"];
/// Commands that only look around: running them explains nothing.
const LOOKING: &[&str] = &[
    "ls", "pwd", "cd", "echo", "cat", "which", "true", "clear", "head", "tail", "wc", "date",
    "whoami", "env", "tree",
];
/// A reply sentence that names a cause: preferred over a mere "because".
static CAUSE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:caused\s+by|the\s+cause|root\s+cause|turns\s+out|the\s+(?:problem|issue|reason|error|culprit|fix)\s+(?:is|was))\b",
    )
});
/// A reply sentence that explains a result.
static EXPLAINS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:because|caused\s+by|the\s+cause|root\s+cause|turns\s+out|the\s+(?:problem|issue|reason|error|culprit)\s+(?:is|was)|(?:this|that|which)\s+means|shows\s+that|found\s+that|was\s+due\s+to|is\s+due\s+to|fails?\s+(?:because|when|since)|the\s+fix\s+(?:is|was))\b",
    )
});

fn command(a: &ActivityInput) -> Option<String> {
    (a.tool == "Bash")
        .then(|| a.input.get("command").and_then(|c| c.as_str()))
        .flatten()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|c| !c.is_empty())
}

/// A command that does more than look around.
fn telling(cmd: &str) -> bool {
    let first = cmd.split_whitespace().next().unwrap_or("");
    !LOOKING.contains(&first)
}

/// A path as the group sees it: its own folder's prefix off.
fn short_path(p: &str) -> &str {
    p.strip_prefix("/workspace/group/").unwrap_or(p)
}

/// One `change` for the files the batch's edits changed.
fn change(activities: &[ActivityInput], senders: &[String]) -> Option<ObservationDraft> {
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
fn bugfix(
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
fn explanation(reply: &[String]) -> Option<&String> {
    let told = |s: &&String| !s.ends_with('?');
    reply
        .iter()
        .filter(told)
        .find(|s| CAUSE.is_match(s))
        .or_else(|| reply.iter().filter(told).find(|s| EXPLAINS.is_match(s)))
}

/// The reply's explanation of what the batch's commands showed, with the
/// commands as its facts.
fn discovery(
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

// ---- the summary ----

pub fn summary(batches: &[BatchInput]) -> SummaryDraft {
    let first = batches
        .iter()
        .flat_map(|b| spoken(&b.prompt, &b.senders))
        .find_map(|(who, text)| {
            let said = sentences(&text);
            (!said.is_empty()).then_some((who, said))
        });
    let (request, title) = match &first {
        None => (String::new(), String::new()),
        Some((who, said)) => {
            let title = shorten(&tidy(&said[0]), MAX_SUMMARY_TITLE);
            let lead = who.as_ref().map(|w| format!("{w}: ")).unwrap_or_default();
            let mut request = lead.clone() + &said[0];
            for s in &said[1..] {
                if request.chars().count() + 1 + s.chars().count() > MAX_REQUEST {
                    break;
                }
                request.push(' ');
                request.push_str(s);
            }
            (shorten(&request, MAX_REQUEST), title)
        }
    };

    let mut investigated: Vec<String> = Vec::new();
    let add = |list: &mut Vec<String>, item: String| {
        if !item.is_empty() && !list.contains(&item) {
            list.push(item);
        }
    };
    for a in batches.iter().flat_map(|b| &b.activities) {
        if let Some(c) = command(a).filter(|c| telling(c)) {
            add(&mut investigated, shorten(&c, MAX_TITLE));
        }
        for f in &a.files_read {
            add(&mut investigated, short_path(f).to_string());
        }
    }
    investigated.truncate(MAX_ITEMS);

    let drafts: Vec<ObservationDraft> = batches.iter().flat_map(observations).collect();
    let titles = |kinds: &[Kind]| -> Vec<String> {
        let mut picked: Vec<&ObservationDraft> =
            drafts.iter().filter(|d| kinds.contains(&d.kind)).collect();
        // Stable: equal importance keeps the order things were said.
        picked.sort_by_key(|d| std::cmp::Reverse(d.importance));
        let mut out: Vec<String> = Vec::new();
        for d in picked {
            if !out.contains(&d.title) {
                out.push(d.title.clone());
            }
        }
        out.truncate(MAX_ITEMS);
        out
    };
    let learned = titles(&[Kind::Fact, Kind::Discovery, Kind::Person, Kind::Preference]);
    let completed = titles(&[Kind::Change, Kind::Bugfix, Kind::Decision]);
    let next_steps = titles(&[Kind::Todo]);

    SummaryDraft {
        request,
        investigated: investigated.join("\n"),
        learned: learned.join("\n"),
        completed: completed.join("\n"),
        next_steps: next_steps.join("\n"),
        title,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> std::path::PathBuf {
        std::env::var_os("G2_FIXTURES")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/fixtures/transcripts")
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
                                files_read: path
                                    .iter()
                                    .filter(|_| tool == "Read")
                                    .cloned()
                                    .collect(),
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
            if o.kind != Kind::Change && !(o.kind == Kind::Bugfix && o.title.ends_with("succeeded"))
            {
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
}
