//! The sentence rules: which said sentence is which kind of observation
//! (the table of the module doc).

use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// Words that may open a sentence without changing what it says ("oh,",
/// "please", "Andy,", "could you"): taken off before the rules look.
pub(super) static LEAD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:oh|ok|okay|so|and|also|btw|by the way|hey|hi|hello|please|pls|fyi|just|yes|yeah|yep|no|nope|well|alright|right|great|cool|thanks|thank you|(?:can|could|would|will) you(?: please)?)\b[,!:.]?\s+)+",
    )
});
/// A name (or one word) said to someone: "Andy, …".
pub(super) static VOCATIVE: LazyLock<Regex> = LazyLock::new(|| re(r"^\p{Lu}[\w'’-]*,\s+"));

pub(super) static REMEMBER_TO: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:remember|don['’]?t forget|do not forget)\s+to\s+\S"));
pub(super) static REMEMBER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:remember|don['’]?t forget|do not forget|never forget|keep in mind|note|for the record)(?P<that>\s+that\b|\s*[:,])?\s*(?P<x>\S.*)$",
    )
});
/// A statement has a verb: "remember the gate code is 4411", not
/// "remember the milk".
pub(super) static STATEMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:is|are|was|were|has|have|had|will|won['’]t|can|can['’]t|does|doesn['’]t|do|don['’]t|'s|’s)\b",
    )
});

pub(super) const RELATION: &str = r"(?:wife|husband|partner|spouse|fianc[eé]e?|boyfriend|girlfriend|boss|manager|friend|best friend|colleague|co-?worker|brother|sister|mother|mom|mum|father|dad|son|daughter|cousin|aunt|uncle|grand(?:ma|mother|pa|father)|neighbou?r|doctor|dentist|teacher|landlord|landlady|flatmate|roommate|assistant|lawyer|accountant|vet|kid|child|niece|nephew|sibling|parent|team lead)s?";

pub(super) static PERSON: LazyLock<[Regex; 3]> = LazyLock::new(|| {
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

pub(super) static PREFERENCE: LazyLock<[Regex; 3]> = LazyLock::new(|| {
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
pub(super) static REACTION: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:it|that|this|them|those|these|you|your|him|her)\b"));

pub(super) static DECISION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:we['’]ll|we\s+will|we\s+shall|let['’]s|let\s+us|(?:we|i)(?:['’]ve|\s+have)?\s+(?:decided|agreed|settled on|chosen|chose)|(?:we['’]re|we\s+are|i['’]m|i\s+am)\s+going\s+with|going\s+with|(?:we['’]ll|i['’]ll|we\s+will|i\s+will)\s+go\s+with|decided|decision\s*:)\s*(?P<r>.*)$",
    )
});
/// What "let's …" / "we'll …" narrates when the agent says it about its
/// own work, and the few that say nothing when people do.
pub(super) static PROCESS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:do|see|check|look|try|start|run|read|examine|explore|investigate|verify|test|find|debug|dig|take|first|now|begin|figure|get|go\s+through|review|understand|analy[sz]e|search|inspect|open|also|then|continue|proceed|move|do\s+(?:this|that)|fix|update|create|add|make|write|implement|set|need|want|think|talk|wait)\b",
    )
});
pub(super) static PEOPLE_FILLER: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^(?:see|think|talk|wait|do\s+(?:this|that|it))\b|^$"));

pub(super) static TODO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:i['’]ll|i\s+will|remind\s+me|todo\b|to-?do\s*:|(?:i|we)\s+(?:need|have|must|should|ought)\s+to|need\s+to|(?:i|we)\s+must|(?:i['’]m|i\s+am|we['’]re|we\s+are)\s+going\s+to)\s*\S",
    )
});
pub(super) static REPLY_TODO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:i['’]ll|i\s+will)\s+(?:remind|ping|message|tell|check\s+back|follow\s+up)|^(?:todo|to-?do)\s*:",
    )
});
pub(super) static WHEN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:tomorrow|tonight|today|(?:by|before|until|on|next|this)\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day|(?:by|before|until)\s+(?:tomorrow|tonight|noon|midnight|next|the\s+end|end\s+of|\d)|next\s+(?:week|month|year|time)|this\s+(?:morning|afternoon|evening|week|weekend|month)|at\s+\d{1,2}(?::\d{2})?\s*(?:am|pm)?|in\s+(?:an?|\d+)\s+(?:minutes?|hours?|days?|weeks?))\b",
    )
});

pub(super) static MY_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^(?:my|our)\s+[\w'’-]+(?:\s+[\w'’-]+){0,4}?\s+(?:is|are|was|were)\s+\S")
});
pub(super) static WHERE_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:(?:the|a|an)\s+)?(?P<s>[\w'’-]+(?:\s+[\w'’-]+){0,4}?)\s+(?:is|are)\s+(?:(?:now|still|currently|usually|always|kept|moored|parked|stored|located|hidden|left)\s+)?(?:at|in|on|under|behind|inside|near|next\s+to|beside)\s+\S",
    )
});
pub(super) static OWNED_FACT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\p{Lu}[\w-]*['’]s\s+[\w'’-]+(?:\s+[\w'’-]+){0,3}?\s+(?i:is|are|was)\s+\S")
});
/// Subjects that point elsewhere ("it is in …", "this is on …").
pub(super) static PRONOUN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:it|this|that|there|here|he|she|they|we|i|you|what|which|who|where|everything|something|nothing|anything|one|all)$",
    )
});

/// What kind of thing `sentence` says, if any.
pub(super) fn classify(sentence: &str, speaker: Speaker) -> Option<Found> {
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
pub(super) fn lead_off(sentence: &str) -> &str {
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
