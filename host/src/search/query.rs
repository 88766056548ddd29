//! FTS5 query building: a user's words become quoted FTS5 terms, so no
//! input is ever FTS5 syntax.
//!
//! Each word becomes a quoted term (all must match) and a trailing `*` on a
//! word makes it a prefix; words made only of punctuation are dropped.
//! The snippet builder takes its terms from `query_words` too.

/// Turns free text into an FTS5 query, or `None` when it has no words.
pub fn fts_query(input: &str) -> Option<String> {
    let terms: Vec<String> = query_words(input)
        .map(|(word, prefix)| {
            let quoted = format!("\"{}\"", word.replace('"', "\"\""));
            if prefix { format!("{quoted}*") } else { quoted }
        })
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// The words of a query that can match something, each with whether it is
/// a prefix (`word*`).
pub(super) fn query_words(input: &str) -> impl Iterator<Item = (&str, bool)> {
    input.split_whitespace().filter_map(|word| {
        let (word, prefix) = match word.strip_suffix('*') {
            Some(w) => (w, true),
            None => (word, false),
        };
        // Words made only of punctuation match nothing in unicode61.
        word.chars()
            .any(char::is_alphanumeric)
            .then_some((word, prefix))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_quoted() {
        assert_eq!(fts_query("tax research").unwrap(), r#""tax" "research""#);
        assert_eq!(fts_query("resea*").unwrap(), r#""resea"*"#);
        assert_eq!(
            fts_query(r#"a"b OR NEAR("#).unwrap(),
            r#""a""b" "OR" "NEAR(""#
        );
        assert_eq!(fts_query("  -- ** \"\" "), None);
        assert_eq!(fts_query(""), None);
    }
}
