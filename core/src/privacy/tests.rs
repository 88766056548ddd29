//! The privacy module's tests: each rule by example, then properties.

use std::borrow::Cow;

use super::*;

#[test]
fn private_and_own_memory_are_removed_with_their_content() {
    assert_eq!(strip_tags("no tags here"), "no tags here");
    assert!(matches!(strip_tags("a < b"), Cow::Borrowed(_)));
    assert_eq!(
        strip_tags("my pin is <private>4417</private>, remember it"),
        "my pin is , remember it"
    );
    assert_eq!(strip_tags("a<PRIVATE>x</Private>b"), "ab");
    assert_eq!(
        strip_tags("<g2-memory>earlier: milk</g2-memory>what now?"),
        "what now?"
    );
    assert_eq!(
        strip_tags("x<system-reminder>ctx</system-reminder>y<private>p</private>z"),
        "xyz"
    );
    // Unclosed: private to the end, never leaked.
    assert_eq!(strip_tags("keep <private>4417 and more"), "keep ");
    // Two in a row, and a closing tag alone is just text.
    assert_eq!(
        strip_tags("<private>a</private><private>b</private>c</private>"),
        "c</private>"
    );
    // Multi-byte text around the tags.
    assert_eq!(strip_tags("é<private>ü</private>ß"), "éß");
}

#[test]
fn tags_with_whitespace_attributes_or_nesting_are_private_too() {
    for text in [
        "a<private >4417</private>b",
        "a<private note=\"x\">4417</private>b",
        "a<PRIVATE\n  lang='en'>4417</Private\t>b",
        "a<private>4417</ private >b",
        "a<private/>4417</private>b",
        "a<private>x<private>4417</private>4417</private>b",
        "a<private note=\"1 > 0\">4417</private>b",
    ] {
        assert_eq!(strip_tags(text), "ab", "{text:?}");
    }
    // Unclosed, or without the opening tag's '>': private to the end.
    assert_eq!(strip_tags("a<private note=\"x\">4417 and on"), "a");
    assert_eq!(strip_tags("a<private note=\"x"), "a");
    assert_eq!(strip_tags("a<private"), "a");
    // Other names stay text, and so does a spaced `<` without its `>`.
    for text in [
        "a <privateer> b",
        "<private-notes>x",
        "</private> alone",
        "a < private b",
        "x &lt; private and more",
    ] {
        assert_eq!(strip_tags(text), text, "{text:?}");
    }
    assert_eq!(
        strip_tags("<g2-memory  source=\"recall\">old</g2-memory>new"),
        "new"
    );
}

#[test]
fn secrets_are_redacted_through_any_depth_of_json_escaping() {
    let secret = "hunter2-zq81";
    let mut text = format!(r#"{{"user":"ann","password":"{secret}","n":1}}"#);
    for depth in 0..6 {
        let cleaned = redact(&text).into_owned();
        assert!(!cleaned.contains("hunter2"), "depth {depth}: {cleaned}");
        assert!(cleaned.contains("ann") && cleaned.contains("[redacted:assignment]"));
        // The JSON around it is intact: it still parses at its depth.
        let mut v = cleaned.clone();
        for _ in 0..depth {
            v = serde_json::from_str::<String>(&v).unwrap();
        }
        let parsed: serde_json::Value =
            serde_json::from_str(&v.replace("[redacted:assignment]", "null")).unwrap();
        assert_eq!(parsed["n"], 1, "depth {depth}: {v}");
        text = serde_json::to_string(&text).unwrap();
    }
    // The issue's shape, written by hand.
    assert_eq!(
        redact(r#"{\\\"password\\\":\\\"s3cr3t pass\\\"}"#),
        r#"{\\\"password\\\":[redacted:assignment]}"#
    );
    // A quote or backslash inside the value, escaped once more.
    let inner = serde_json::to_string(&serde_json::json!({"token": "a\"b\\c-zq81"})).unwrap();
    let outer = serde_json::to_string(&inner).unwrap();
    for t in [&inner, &outer] {
        let r = redact(t);
        assert!(!r.contains("zq81") && !r.contains("b\\"), "{r}");
    }
    // Unclosed: to the end of its line.
    assert_eq!(
        redact("password=\"hunter2 and more\nnext line"),
        "password=[redacted:assignment]\nnext line"
    );
    assert_eq!(redact("token: 'abc"), "token: [redacted:assignment]");
}

#[test]
fn an_entirely_private_prompt_is_known() {
    assert!(entirely_private("<private>my pin is 4417</private>"));
    assert!(entirely_private("  <private>x</private>\n<private>y"));
    assert!(!entirely_private("hi <private>x</private>"));
    assert!(!entirely_private(""));
    assert!(!entirely_private("plain"));
}

#[test]
fn each_kind_of_secret_is_redacted() {
    let cases = [
        (
            "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789-ABCD done",
            "key [redacted:anthropic-key] done",
        ),
        (
            "OPENAI sk-proj-abcdefghijklmnopqrstuvwx1234",
            "OPENAI [redacted:openai-key]",
        ),
        (
            "aws AKIAIOSFODNN7EXAMPLE.",
            "aws [redacted:aws-access-key].",
        ),
        (
            "gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 x",
            "gh [redacted:github-token] x",
        ),
        ("xoxb-123456789012-abcdefABCDEF", "[redacted:slack-token]"),
        (
            "bot 110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw here",
            "bot [redacted:telegram-bot-token] here",
        ),
        (
            "Authorization: Bearer abc.def.ghijklmnopqrstuvwxyz",
            "Authorization: [redacted:bearer-token]",
        ),
        ("password=hunter22", "password=[redacted:assignment]"),
        (
            "DB_PASSWORD: \"s3cr3t value\"",
            "DB_PASSWORD: [redacted:assignment]",
        ),
        (
            "export API_KEY='abc123'",
            "export API_KEY=[redacted:assignment]",
        ),
        ("token = abc&x=1", "token = [redacted:assignment]&x=1"),
        // JSON, and JSON inside a JSON string (a tool's input).
        (
            r#"{"user":"ann","password":"hunter22"}"#,
            r#"{"user":"ann","password":[redacted:assignment]}"#,
        ),
        (
            r#"{"client_secret": "a b", "n": 1}"#,
            r#"{"client_secret": [redacted:assignment], "n": 1}"#,
        ),
        (
            r#""{\"api_key\":\"abc def\",\"n\":1}""#,
            r#""{\"api_key\":[redacted:assignment],\"n\":1}""#,
        ),
        ("{'token': 'abc'}", "{'token': [redacted:assignment]}"),
        (r#"{"token":12345}"#, r#"{"token":[redacted:assignment]}"#),
    ];
    for (input, want) in cases {
        assert_eq!(redact(input), want, "{input}");
    }
    let pem =
        "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter";
    assert_eq!(redact(pem), "before\n[redacted:private-key]\nafter");
    // Cut off mid-key: the rest is still a key.
    assert_eq!(
        redact("x -----BEGIN PRIVATE KEY-----\nMIIE"),
        "x [redacted:private-key]"
    );
}

#[test]
fn talk_about_secrets_is_not_a_secret() {
    for text in [
        "the token budget is 30k",
        "our password policy says 12 characters",
        "ask for a sk- prefix key",
        "risk-free, desk-ant-hill",
        "AKIA alone",
        "bearer of bad news",
        r#"{"usage":{"input_tokens":1234,"max_tokens":100}}"#,
    ] {
        assert_eq!(redact(text), text);
        assert!(matches!(redact(text), Cow::Borrowed(_)), "{text}");
    }
}

#[test]
fn redaction_is_stable_and_literals_are_added() {
    let once = redact("password=hunter22 sk-ant-api03-abcdefghijklmnopqrstu");
    assert_eq!(redact(&once), once, "a second pass changes nothing");
    let r = Redactor::with_literals(["super-secret-value", "short"]);
    assert_eq!(
        r.redact("x super-secret-value y short"),
        "x [redacted:credential] y short"
    );
}

#[test]
fn clean_strips_then_redacts() {
    let r = Redactor::default();
    assert_eq!(r.cleaned("nothing here"), None);
    assert_eq!(r.cleaned("a <b> c"), None);
    assert_eq!(r.cleaned("x<private>y</private>").as_deref(), Some("x"));
    assert_eq!(
        clean("<private>4417</private>run with AKIAIOSFODNN7EXAMPLE"),
        "run with [redacted:aws-access-key]"
    );
}

proptest::proptest! {
    /// A private span in any spelling of its tags (case, whitespace,
    /// attributes, closing whitespace, nesting) never survives.
    #[test]
    fn every_spelling_of_a_private_tag_is_stripped(
        before in "[ -~\n]{0,30}",
        after in "[ -~\n]{0,30}",
        pin in "[0-9]{6,9}",
        upper in proptest::collection::vec(proptest::bool::ANY, 7),
        space in "[ \t\n]{0,3}",
        attr in proptest::option::of("[a-z]{1,5}=\"[a-z0-9 >]{0,8}\""),
        close_space in "[ \t]{0,2}",
        nested in proptest::bool::ANY,
        closed in proptest::bool::ANY,
    ) {
        let name: String = "private"
            .chars()
            .zip(&upper)
            .map(|(c, u)| if *u { c.to_ascii_uppercase() } else { c })
            .collect();
        let sep = if space.is_empty() && attr.is_some() { " " } else { &space };
        let open = format!("<{name}{sep}{}>", attr.unwrap_or_default());
        let body = if nested {
            format!("a{open}{pin}</{name}>{pin}")
        } else {
            pin.clone()
        };
        let close = if closed { format!("</{close_space}{name}{close_space}>") } else { String::new() };
        let text = format!("{before}{open}{body}{close}{after}");
        let cleaned = strip_tags(&text).into_owned();
        proptest::prop_assert!(!cleaned.contains(&pin), "{text:?} -> {cleaned:?}");
    }

    /// A secret assigned in JSON, escaped into JSON strings to any
    /// depth, never survives, whatever its characters.
    #[test]
    fn an_assigned_secret_never_survives_escaping(
        key in "(password|api_key|client_secret|token|DB_PASSWD)",
        core in "[A-Za-z0-9]{10,16}",
        pre in "[ -~]{0,4}",
        post in "[ -~]{0,4}",
        depth in 0usize..5,
    ) {
        let value = format!("{pre}{core}{post}");
        let mut text = serde_json::json!({ "cmd": "deploy", key: value }).to_string();
        for _ in 0..depth {
            text = serde_json::to_string(&text).unwrap();
        }
        let cleaned = redact(&text).into_owned();
        proptest::prop_assert!(!cleaned.contains(&core), "{text} -> {cleaned}");
        proptest::prop_assert_eq!(redact(&cleaned).into_owned(), cleaned);
    }

    /// Whatever surrounds them, a private span and a generated key never
    /// survive cleaning, and cleaning twice changes nothing more.
    #[test]
    fn nothing_marked_or_shaped_as_secret_survives(
        before in "[ -~\\n]{0,40}",
        after in "[ -~\\n]{0,40}",
        pin in "[0-9]{6,9}",
        key in "[A-Z2-7]{16}",
    ) {
        let aws = format!("AKIA{key}");
        let text = format!("{before} <private>{pin}</private> {aws} {after}");
        let cleaned = clean(&text).into_owned();
        proptest::prop_assert!(!cleaned.contains(&aws), "{cleaned}");
        proptest::prop_assert!(!cleaned.contains(&format!("<private>{pin}")), "{cleaned}");
        proptest::prop_assert_eq!(clean(&cleaned).into_owned(), cleaned);
    }
}

// --- the shapes of issue 34 ---------------------------------------------------

/// A made-up model key and API token of the real shapes.
const KEY: &str = "sk-ant-api03-Zq8vN3kP1xW7mR4tY6uB2cF9hJ5dL0sGaEiOoQwErTyUiPaSdFgHjKlZxCvBnM1234567890abcdefGHIJKL-qrstuvAA";
const TOKEN: &str = "g2tok-7fQ1mZ9xR3vB8nK2pL6wT4yH0cJ5dS1a";

fn host() -> Redactor {
    Redactor::with_literals([KEY, TOKEN])
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Every shape a credential is pasted in (what the property test and the
/// examples plant).
fn shapes(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string()];
    for pre in ["", "a", "ab"] {
        let blob = format!("{pre}Authorization: {secret}\n");
        out.push(b64(blob.as_bytes()));
        out.push(b64url(blob.as_bytes()));
    }
    // MIME-wrapped.
    let long = b64(format!("user:{secret}").as_bytes());
    out.push(
        long.as_bytes()
            .chunks(20)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect::<Vec<_>>()
            .join("\r\n"),
    );
    out.push(secret.bytes().map(|b| format!("%{b:02X}")).collect());
    out.push(secret.bytes().map(|b| format!("%{b:02x}")).collect());
    // Partly percent-encoded: every third byte.
    out.push(
        secret
            .bytes()
            .enumerate()
            .map(|(i, b)| match i % 3 {
                0 => format!("%{b:02X}"),
                _ => (b as char).to_string(),
            })
            .collect(),
    );
    out.push(secret.bytes().map(|b| format!("{b:02x}")).collect());
    out.push(secret.bytes().map(|b| format!("{b:02X} ")).collect());
    out.push(secret.chars().map(|c| format!("{c} ")).collect());
    let mid = secret.len() / 2;
    out.push(format!("{}\n{}", &secret[..mid], &secret[mid..]));
    out.push(format!("{}\\n{}", &secret[..7], &secret[7..]));
    out.push(format!("{} {}", &secret[..7], &secret[7..]));
    out.push(format!("{}\u{200b}{}", &secret[..mid], &secret[mid..]));
    out
}

// The leak oracle, shared with the integration tests.
#[path = "../../../tests/leak_oracle.rs"]
mod leak_oracle;
use leak_oracle::leaks;

#[test]
fn the_hosts_credentials_are_redacted_in_every_shape() {
    let r = host();
    for secret in [KEY, TOKEN] {
        for shape in shapes(secret) {
            assert!(leaks(&shape, secret), "the oracle reads {shape:?}");
            let text = format!("before {shape} after");
            let cleaned = r.redact(&text).into_owned();
            assert!(!leaks(&cleaned, secret), "{text:?} -> {cleaned:?}");
            assert!(cleaned.starts_with("before ") && cleaned.ends_with(" after"));
            assert_eq!(r.redact(&cleaned), cleaned, "stable");
        }
    }
}

#[test]
fn a_piece_of_a_credential_is_redacted_and_a_short_one_is_not() {
    let r = host();
    // What the container's hook leaves of a key split over two lines.
    let tail = &KEY[KEY.len() - 40..];
    let text = format!("key: [redacted:anthropic-key]\n{tail} done");
    assert_eq!(
        r.redact(&text),
        "key: [redacted:anthropic-key]\n[redacted:credential] done"
    );
    // Shorter than 16 characters: not told from ordinary text.
    let short = &TOKEN[TOKEN.len() - 12..];
    assert_eq!(r.redact(short), short);
    // The shared prefix of every Anthropic key is no piece of this one.
    assert_eq!(
        r.redact("keys start sk-ant-api03-"),
        "keys start sk-ant-api03-"
    );
    // A short literal is matched whole only.
    let r = Redactor::with_literals(["hunter2-x"]);
    assert_eq!(
        r.redact("pw h u n t e r 2 - x!"),
        "pw [redacted:credential]!"
    );
    assert_eq!(r.redact("hunter2 alone"), "hunter2 alone");
}

#[test]
fn credentials_in_multi_byte_text_keep_the_text_whole() {
    let r = host();
    let text = format!("é{}ü {} ß", TOKEN, b64(format!("ü{KEY}").as_bytes()));
    let cleaned = r.redact(&text);
    assert!(
        !leaks(&cleaned, TOKEN) && !leaks(&cleaned, KEY),
        "{cleaned}"
    );
    assert!(cleaned.starts_with('é') && cleaned.ends_with('ß'));
}

#[test]
fn assignments_of_every_common_name_are_redacted() {
    let cases = [
        ("SECRET_KEY=abc123def", "SECRET_KEY=[redacted:assignment]"),
        (
            "export SECRET_KEY=\"abc 123\"",
            "export SECRET_KEY=[redacted:assignment]",
        ),
        (
            "export DEPLOY_TOKEN='x-1'",
            "export DEPLOY_TOKEN=[redacted:assignment]",
        ),
        ("APP_SECRET=s3", "APP_SECRET=[redacted:assignment]"),
        ("DB_PASSWORD=p4ss", "DB_PASSWORD=[redacted:assignment]"),
        ("STRIPE_KEY=rk_live_9", "STRIPE_KEY=[redacted:assignment]"),
        (
            "SECRET_KEY_BASE: 'abc'",
            "SECRET_KEY_BASE: [redacted:assignment]",
        ),
        (
            r#"{"signing_key": "abc"}"#,
            r#"{"signing_key": [redacted:assignment]}"#,
        ),
        (
            "db:\n  password: |\n    hunter22\n    more\n  host: x",
            "db:\n  password: [redacted:assignment]\n  host: x",
        ),
        (
            "password: >-\n  folded\n\n  on\nuser: ann",
            "password: [redacted:assignment]\nuser: ann",
        ),
        // A YAML file in a tool's input: the line breaks are escaped.
        (
            r#"{"content":"db:\n  password: |\n    hunter22\n  host: x"}"#,
            r#"{"content":"db:\n  password: [redacted:assignment]\n  host: x"}"#,
        ),
        (
            r#"{"content":"token: |\n  abc\n"}"#,
            r#"{"content":"token: [redacted:assignment]\n"}"#,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(redact(input), want, "{input}");
    }
}

#[test]
fn keys_that_name_no_secret_are_left_alone() {
    for text in [
        "PRIMARY_KEY = 'id'",
        "FOREIGN_KEY: user_id",
        "SSH_PUBLIC_KEY=ssh-ed25519",
        "primary_key=True",
        "sort_key: created_at",
        "ALTER TABLE t ADD PRIMARY KEY (id)",
        "max_tokens: 5",
        "the KEY=value syntax",
    ] {
        assert_eq!(redact(text), text);
    }
}

#[test]
fn private_tags_are_stripped_in_every_spelling() {
    for text in [
        "a< private >4417</ private >b",
        "a<\nprivate>4417</private>b",
        "a< private\n>4417< /private>b",
        r"a\u003cprivate\u003e4417\u003c/private\u003eb",
        r"a\u003CPrivate\u003E4417\u003C/private\u003Eb",
        r"a\\u003cprivate\\u003e4417\\u003c/private\\u003eb",
        r"a\\\\u003cprivate\\\\u003e4417\\\\u003c\/private\\\\u003eb",
        r"a\u003c\nprivate\u003e4417\u003c/private\u003eb",
        "a&lt;private&gt;4417&lt;/private&gt;b",
        "a&LT;private note=&quot;x&quot;&GT;4417&lt;/private&gt;b",
        "a&#60;private&#62;4417&#x3c;/private&#x3e;b",
        r"a<private>4417\u003c/private\u003eb",
    ] {
        assert_eq!(strip_tags(text), "ab", "{text:?}");
    }
    // Unclosed in any spelling: private to the end.
    assert_eq!(strip_tags(r"a\u003cprivate\u003e4417"), "a");
    assert_eq!(strip_tags("a&lt;private&gt;4417"), "a");
    // Escapes of other things stay text.
    for text in [
        r"\u003cb\u003ebold\u003c/b\u003e",
        "&lt;privateer&gt;",
        r"C:\\private\\x",
        "AT&T",
    ] {
        assert_eq!(strip_tags(text), text, "{text:?}");
    }
}

#[test]
fn an_envelope_cleans_the_same_before_and_after_unescaping() {
    let text = "pin <private>4417</private> ok";
    let env = crate::envelope::write([("Ann", "t", text)]);
    let escaped = strip_tags(&env);
    assert!(!escaped.contains("4417"), "{escaped}");
    let back = crate::envelope::read(&env).unwrap();
    assert_eq!(strip_tags(&back.messages[0].text), "pin  ok");
}

#[test]
fn a_redactor_without_literals_is_cheap_to_show() {
    assert_eq!(format!("{:?}", host()), "Redactor(2 literals)");
    assert_eq!(format!("{:?}", Redactor::default()), "Redactor(0 literals)");
}

proptest::proptest! {
    /// For any text around it, a credential planted in any shape never
    /// survives; redacting twice changes nothing more.
    #[test]
    fn a_planted_credential_never_survives(
        before in "[ -~\n]{0,40}",
        after in "[ -~\n]{0,40}",
        secret in "[A-Za-z0-9_-]{20,48}",
        pick in 0usize..64,
        pre in "[ -~]{0,5}",
    ) {
        let r = Redactor::with_literals([secret.as_str()]);
        let all = shapes(&secret);
        let mut shape = all[pick % all.len()].clone();
        if pick % 4 == 0 {
            // Base64 embedded at any offset of a longer blob.
            shape = b64(format!("{pre}{secret}{after}").as_bytes());
        }
        let text = format!("{before}{shape}{after}");
        let cleaned = r.clean(&text).into_owned();
        proptest::prop_assert!(!leaks(&cleaned, &secret), "{text:?} -> {cleaned:?}");
        proptest::prop_assert_eq!(r.clean(&cleaned).into_owned(), cleaned);
    }

    /// Text that holds no secret is left as it is, credentials known or not.
    #[test]
    fn text_without_secrets_is_unchanged(
        // Printable text without `<` and `&` (which may open a tag).
        text in "[ -%'-;=-~\n]{0,300}",
        secret in "[A-Za-z0-9]{24,40}",
    ) {
        let r = Redactor::with_literals([secret.as_str()]);
        proptest::prop_assume!(matches!(redact(&text), Cow::Borrowed(_)));
        proptest::prop_assert!(matches!(r.clean(&text), Cow::Borrowed(_)), "{text:?}");
    }

    /// A private span in a JSON-escaped or entity spelling never survives.
    #[test]
    fn escaped_private_tags_never_survive(
        before in "[ -~\n]{0,30}",
        after in "[ -~\n]{0,30}",
        pin in "[0-9]{6,9}",
        depth in 0usize..4,
        hex_upper in proptest::bool::ANY,
        entity in proptest::bool::ANY,
    ) {
        let (lt, gt) = if entity {
            ("&lt;".to_string(), "&gt;".to_string())
        } else {
            let bs = "\\".repeat(2usize.pow(depth as u32) - 1 + usize::from(depth == 0));
            let (l, g) = if hex_upper { ("u003C", "u003E") } else { ("u003c", "u003e") };
            (format!("{bs}{l}"), format!("{bs}{g}"))
        };
        let text = format!("{before}{lt}private{gt}{pin}{lt}/private{gt}{after}");
        let cleaned = strip_tags(&text).into_owned();
        proptest::prop_assert!(!cleaned.contains(&pin), "{text:?} -> {cleaned:?}");
    }
}
