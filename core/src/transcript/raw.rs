//! The borrowed view of one transcript line, read leniently.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};

// ---------------------------------------------------------------------------
// The borrowed view of one line. Every field is optional: a line missing one
// is still read, and fields not named here are skipped by serde unparsed.

#[derive(Deserialize)]
pub(super) struct RawLine<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(super) kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) subtype: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) uuid: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow, default)]
    pub(super) session_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) cwd: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(super) timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "isMeta", default)]
    pub(super) is_meta: Option<bool>,
    #[serde(rename = "isSidechain", default)]
    pub(super) is_sidechain: Option<bool>,
    #[serde(rename = "agentId", borrow, default)]
    pub(super) agent_id: Option<Cow<'a, str>>,
    #[serde(rename = "isCompactSummary", default)]
    pub(super) is_compact_summary: Option<bool>,
    #[serde(borrow, default)]
    pub(super) message: Option<RawMessage<'a>>,
    #[serde(borrow, default)]
    pub(super) summary: Option<Cow<'a, str>>,
    #[serde(rename = "leafUuid", borrow, default)]
    pub(super) leaf_uuid: Option<Cow<'a, str>>,
    #[serde(rename = "compactMetadata", borrow, default)]
    pub(super) compact_metadata: Option<RawCompactMeta<'a>>,
}

#[derive(Deserialize)]
pub(super) struct RawMessage<'a> {
    #[serde(borrow, default)]
    pub(super) content: Option<Content<'a>>,
}

#[derive(Deserialize, Default)]
pub(super) struct RawCompactMeta<'a> {
    #[serde(borrow, default)]
    pub(super) trigger: Option<Cow<'a, str>>,
    #[serde(rename = "preTokens", default)]
    pub(super) pre_tokens: Option<u64>,
}

/// `message.content`: a string, or blocks of which only `text` blocks count.
pub(super) enum Content<'a> {
    Text(Cow<'a, str>),
    Texts(Vec<Cow<'a, str>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Content<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Content::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut texts = Vec::new();
                while let Some(block) = seq.next_element::<Block<'a>>()? {
                    if let Block::Text(t) = block {
                        texts.push(t);
                    }
                }
                Ok(Content::Texts(texts))
            }
            // Anything else (null, a number, an object) is content we do not
            // read; the line is still fine.
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Content::Texts(Vec::new()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Content::Texts(Vec::new()))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Content::Texts(Vec::new()))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Content::Texts(Vec::new()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Content::Texts(Vec::new()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                IgnoredAny::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Content::Texts(Vec::new()))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// One content block: a `text` block's text, or something we skip.
pub(super) enum Block<'a> {
    Text(Cow<'a, str>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Block<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(rename = "type", borrow, default)]
            kind: Option<Cow<'a, str>>,
            #[serde(borrow, default, deserialize_with = "lenient_str")]
            text: Option<Cow<'a, str>>,
        }
        // A block that is not an object (a bare string in old transcripts is
        // text; anything else is skipped).
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Block<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let raw = Raw::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(match (raw.kind.as_deref(), raw.text) {
                    (Some("text"), Some(t)) => Block::Text(t),
                    _ => Block::Other,
                })
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Block::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Block::Text(Cow::Owned(v.to_string())))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Block::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Block::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Block::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Block::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Block::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Block::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A string, or `None` for any other JSON value (a block's `text` that is
/// not a string is not worth failing the line for).
pub(super) fn lenient_str<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    struct V<'a>(std::marker::PhantomData<&'a ()>);
    impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
        type Value = Option<Cow<'a, str>>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any value")
        }
        fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Borrowed(v)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(Cow::Owned(v.to_string())))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            IgnoredAny::deserialize(de::value::MapAccessDeserializer::new(map))?;
            Ok(None)
        }
    }
    d.deserialize_any(V(std::marker::PhantomData))
}
