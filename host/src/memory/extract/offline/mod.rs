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

use g2_core::envelope;

use g2_core::validate::GroupFolder;

mod rules;
mod text;
mod tools;

use rules::*;
pub(crate) use text::shorten;
use text::*;
use tools::*;

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
mod tests;
