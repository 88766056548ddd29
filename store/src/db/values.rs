//! The values a statement binds and a row gives, the same on both
//! backends: [`Value`], [`Param`]/[`Params`] (and `params!`), [`FromValue`]
//! and [`Optional`]. Converting them to each driver's types is
//! `backend.rs`'s.

use crate::{Error, Result};

/// A value as both backends take it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl Value<'_> {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }
}

/// A statement parameter.
pub trait Param {
    fn value(&self) -> Value<'_>;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl Param for $t {
            fn value(&self) -> Value<'_> {
                // Saturates: no stored count or id comes near i64::MAX.
                Value::Int(i64::try_from(*self).unwrap_or(i64::MAX))
            }
        }
    )*};
}
int_param!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

impl Param for bool {
    fn value(&self) -> Value<'_> {
        Value::Int(i64::from(*self))
    }
}
impl Param for f64 {
    fn value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}
impl Param for f32 {
    fn value(&self) -> Value<'_> {
        Value::Real(f64::from(*self))
    }
}
impl Param for str {
    fn value(&self) -> Value<'_> {
        Value::Text(self)
    }
}
impl Param for String {
    fn value(&self) -> Value<'_> {
        Value::Text(self)
    }
}
impl Param for [u8] {
    fn value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}
impl Param for Vec<u8> {
    fn value(&self) -> Value<'_> {
        Value::Blob(self)
    }
}
impl Param for g2_core::validate::GroupFolder {
    fn value(&self) -> Value<'_> {
        Value::Text(self.as_str())
    }
}
impl<T: Param> Param for Option<T> {
    fn value(&self) -> Value<'_> {
        self.as_ref().map_or(Value::Null, Param::value)
    }
}
impl<T: Param + ?Sized> Param for &T {
    fn value(&self) -> Value<'_> {
        (**self).value()
    }
}
impl Param for Value<'_> {
    fn value(&self) -> Value<'_> {
        *self
    }
}

/// A statement's parameters: `()`, an array of one type (`[id]`), or a
/// list of any ([`params!`](crate::params)).
pub trait Params {
    fn list(&self) -> Vec<&dyn Param>;
}

impl Params for () {
    fn list(&self) -> Vec<&dyn Param> {
        Vec::new()
    }
}
impl<T: Param, const N: usize> Params for [T; N] {
    fn list(&self) -> Vec<&dyn Param> {
        self.iter().map(|p| p as &dyn Param).collect()
    }
}
impl Params for &[&dyn Param] {
    fn list(&self) -> Vec<&dyn Param> {
        self.to_vec()
    }
}
impl<T: Param> Params for Vec<T> {
    fn list(&self) -> Vec<&dyn Param> {
        self.iter().map(|p| p as &dyn Param).collect()
    }
}

/// Parameters of mixed types: `params![folder, limit, text]`.
#[macro_export]
macro_rules! params {
    () => { () };
    ($($p:expr),+ $(,)?) => {
        &[$(&$p as &dyn $crate::db::Param),+] as &[&dyn $crate::db::Param]
    };
}

/// A column value a [`Row`](super::Row) converts to.
pub trait FromValue: Sized {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String>;
}

fn mismatch<T>(want: &str, v: Value<'_>) -> std::result::Result<T, String> {
    Err(format!("a {} where {want} was expected", v.kind()))
}

macro_rules! int_from {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
                match v {
                    Value::Int(n) => <$t>::try_from(n).map_err(|e| format!("{n}: {e}")),
                    v => mismatch("an integer", v),
                }
            }
        }
    )*};
}
int_from!(i32, i64, u8, u16, u32, u64, usize);

impl FromValue for bool {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        match v {
            Value::Int(n) => Ok(n != 0),
            v => mismatch("a boolean", v),
        }
    }
}
impl FromValue for f64 {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        match v {
            Value::Real(f) => Ok(f),
            #[allow(clippy::cast_precision_loss)]
            Value::Int(n) => Ok(n as f64),
            v => mismatch("a number", v),
        }
    }
}
impl FromValue for f32 {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        #[allow(clippy::cast_possible_truncation)]
        f64::from_value(v).map(|f| f as f32)
    }
}
impl FromValue for String {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.to_owned()),
            v => mismatch("text", v),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b.to_vec()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            v => mismatch("a blob", v),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: Value<'_>) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// `query_row(..).optional()`: no row is `None`, other errors stay.
pub trait Optional<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> Optional<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoRow) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
