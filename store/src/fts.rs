//! Full-text search on PostgreSQL, written as the store writes it for
//! SQLite's FTS5: `t MATCH ?n` and `bm25(t, w…)` become `tsvector` /
//! `tsquery` operations on the `tsv` column each `*_fts` table has there
//! (`migrations/postgres/0001_schema.sql`), and the FTS5 query the host
//! builds (quoted terms, `"prefix"*`, phrases, `AND`/`OR`/`NOT`,
//! parentheses) becomes a `tsquery`.
//!
//! Both sides split text the way FTS5's `unicode61` does: at every
//! character that is not a letter or digit (the schema's `fts_text()`
//! turns punctuation into spaces before PostgreSQL's parser sees it), and
//! stem with English Snowball and no stop words (the `g2` text search
//! configuration), as FTS5's `porter` does. Ranking is `ts_rank` with
//! length normalisation, the columns weighted as `bm25()`'s arguments
//! weight them, negated so that lower is better as with `bm25()`.

use std::sync::LazyLock;

use regex::{Captures, Regex};

/// The statement with its `MATCH` and `bm25()` in PostgreSQL's words, and
/// the (0-based) parameter that holds the full-text query.
pub(crate) fn rewrite(sql: &str) -> (String, Option<usize>) {
    static MATCH: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(\w+) MATCH \$(\d+)").expect("a valid pattern"));
    static BM25: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"bm25\((\w+)((?:\s*,\s*[0-9.]+)*)\)").expect("a valid pattern")
    });
    let Some(param) = MATCH.captures(sql).and_then(|c| c[2].parse::<usize>().ok()) else {
        return (sql.to_string(), None);
    };
    let sql = MATCH.replace_all(sql, |c: &Captures<'_>| {
        format!("{}.tsv @@ to_tsquery('g2', ${})", &c[1], &c[2])
    });
    let sql = BM25.replace_all(&sql, |c: &Captures<'_>| {
        format!(
            "(-ts_rank('{}', {}.tsv, to_tsquery('g2', ${param}), 1))",
            weights(&c[2]),
            &c[1]
        )
    });
    (sql.into_owned(), Some(param - 1))
}

/// `bm25()`'s column weights (", 4.0, 1.0") as `ts_rank`'s array: columns
/// are weighted A, B, C in order in the schema, and the array lists D, C,
/// B, A, each relative to the largest. No weights: all columns alike.
fn weights(args: &str) -> String {
    let w: Vec<f64> = args
        .split(',')
        .filter_map(|a| a.trim().parse().ok())
        .collect();
    if w.is_empty() {
        return "{1,1,1,1}".into();
    }
    let max = w
        .iter()
        .copied()
        .fold(f64::MIN, f64::max)
        .max(f64::MIN_POSITIVE);
    let at = |i: usize| w.get(i).map_or(0.0, |x| x / max);
    format!("{{0,{},{},{}}}", at(2), at(1), at(0))
}

/// An FTS5 query as PostgreSQL `tsquery` text: quoted strings are terms
/// (several words: a phrase, `<->`), a `*` after one a prefix (`:*`),
/// `AND`/`OR`/`NOT` and parentheses are kept as `&`, `|`, `& !` and
/// parentheses, and terms side by side are ANDed. A term with no letter or
/// digit is dropped.
pub(crate) fn tsquery(fts5: &str) -> String {
    let mut out = String::new();
    // Whether the last thing written can be followed by a term.
    let mut after_term = false;
    let mut chars = fts5.chars().peekable();
    let operand = |out: &mut String, after_term: &mut bool, text: String| {
        if text.is_empty() {
            return;
        }
        if *after_term {
            out.push_str(" & ");
        }
        out.push_str(&text);
        *after_term = true;
    };
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut term = String::new();
                while let Some(c) = chars.next() {
                    if c == '"' {
                        if chars.peek() == Some(&'"') {
                            chars.next();
                            term.push('"');
                            continue;
                        }
                        break;
                    }
                    term.push(c);
                }
                let prefix = chars.peek() == Some(&'*');
                if prefix {
                    chars.next();
                }
                operand(&mut out, &mut after_term, phrase(&term, prefix));
            }
            '(' => {
                if after_term {
                    out.push_str(" & ");
                }
                out.push('(');
                after_term = false;
            }
            ')' => {
                out.push(')');
                after_term = true;
            }
            c if c.is_whitespace() => {}
            _ => {
                let mut word = c.to_string();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '"' || c == '(' || c == ')' {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                match word.as_str() {
                    "AND" if after_term => {
                        out.push_str(" & ");
                        after_term = false;
                    }
                    "OR" if after_term => {
                        out.push_str(" | ");
                        after_term = false;
                    }
                    "NOT" if after_term => {
                        out.push_str(" & !");
                        after_term = false;
                    }
                    _ => {
                        let prefix = word.ends_with('*');
                        let w = word.trim_end_matches('*').to_string();
                        operand(&mut out, &mut after_term, phrase(&w, prefix));
                    }
                }
            }
        }
    }
    // An operator left dangling (a dropped last term) is cut off.
    let trimmed = out.trim_end_matches([' ', '&', '|', '!']);
    trimmed.to_string()
}

/// One FTS5 string as a lexeme or a phrase of lexemes.
fn phrase(text: &str, prefix: bool) -> String {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let n = words.len();
    let lexemes: Vec<String> = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let star = if prefix && i + 1 == n { ":*" } else { "" };
            format!("'{}'{star}", w.to_lowercase())
        })
        .collect();
    match lexemes.len() {
        0 => String::new(),
        1 => lexemes.into_iter().next().unwrap_or_default(),
        _ => format!("({})", lexemes.join(" <-> ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts5_queries_become_tsqueries() {
        assert_eq!(tsquery(r#""tax" "research""#), "'tax' & 'research'");
        assert_eq!(tsquery(r#""resea"*"#), "'resea':*");
        assert_eq!(
            tsquery(r#""run the uname" OR "uname""#),
            "('run' <-> 'the' <-> 'uname') | 'uname'"
        );
        assert_eq!(tsquery(r#""a" AND ("b" OR "c")"#), "'a' & ('b' | 'c')");
        assert_eq!(
            tsquery(r#""a""b" "OR" "NEAR(""#),
            "('a' <-> 'b') & 'or' & 'near'"
        );
        assert_eq!(tsquery(r#""--" "x""#), "'x'");
        assert_eq!(tsquery(r#""x" OR "--""#), "'x'");
        assert_eq!(tsquery(r#""Café" "naïve""#), "'café' & 'naïve'");
        assert_eq!(tsquery(""), "");
    }

    #[test]
    fn match_and_bm25_become_tsvector_operations() {
        let (sql, param) = rewrite(
            "SELECT rowid, bm25(archives_fts, 4.0, 1.0) AS score FROM archives_fts \
             WHERE archives_fts MATCH $1 ORDER BY score",
        );
        assert_eq!(param, Some(0));
        assert_eq!(
            sql,
            "SELECT rowid, (-ts_rank('{0,0,0.25,1}', archives_fts.tsv, to_tsquery('g2', $1), 1)) \
             AS score FROM archives_fts WHERE archives_fts.tsv @@ to_tsquery('g2', $1) ORDER BY score"
        );
        assert_eq!(
            rewrite("SELECT 1 FROM t WHERE a = $1"),
            ("SELECT 1 FROM t WHERE a = $1".into(), None)
        );
    }
}
