//! What each driver takes and gives: parameters bound for rusqlite and
//! for PostgreSQL (converted to the type the server inferred), and rows
//! read from either as [`Value`]s.

use std::error::Error as StdError;

use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::values::{FromValue, Param, Value};
use crate::{Error, Result, fts};

/// One result row.
pub struct Row<'r>(pub(super) RowRef<'r>);

pub(super) enum RowRef<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl Row<'_> {
    /// Column `i` as a `T`; an error naming the column when it does not
    /// convert.
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T> {
        let v = self.get_ref(i)?;
        T::from_value(v).map_err(|why| Error::Column {
            index: i,
            why: why.clone(),
        })
    }

    /// Column `i` as it is stored.
    pub fn get_ref(&self, i: usize) -> Result<Value<'_>> {
        match &self.0 {
            RowRef::Sqlite(r) => Ok(match r.get_ref(i)? {
                rusqlite::types::ValueRef::Null => Value::Null,
                rusqlite::types::ValueRef::Integer(n) => Value::Int(n),
                rusqlite::types::ValueRef::Real(f) => Value::Real(f),
                rusqlite::types::ValueRef::Text(b) => {
                    Value::Text(std::str::from_utf8(b).map_err(|e| Error::Column {
                        index: i,
                        why: e.to_string(),
                    })?)
                }
                rusqlite::types::ValueRef::Blob(b) => Value::Blob(b),
            }),
            RowRef::Postgres(r) => Ok(r.try_get::<_, Any<'_>>(i)?.0),
        }
    }
}

/// A parameter bound for rusqlite.
pub(super) struct Sq<'p>(&'p dyn Param);

impl rusqlite::ToSql for Sq<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value as V, ValueRef as R};
        Ok(match self.0.value() {
            Value::Null => ToSqlOutput::Owned(V::Null),
            Value::Int(n) => ToSqlOutput::Owned(V::Integer(n)),
            Value::Real(f) => ToSqlOutput::Owned(V::Real(f)),
            Value::Text(s) => ToSqlOutput::Borrowed(R::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(R::Blob(b)),
        })
    }
}

pub(super) fn sqlite_args<'p>(list: &[&'p dyn Param]) -> Vec<Sq<'p>> {
    list.iter().map(|p| Sq(*p)).collect()
}

/// A parameter bound for PostgreSQL: converted to the type the server
/// inferred for its placeholder.
#[derive(Debug)]
pub(super) struct Pq<'p>(Value<'p>);

pub(super) struct PgArgs<'p> {
    values: Vec<Value<'p>>,
    /// The full-text query, as PostgreSQL's `tsquery` text.
    tsquery: Option<(usize, String)>,
}

impl PgArgs<'_> {
    pub(super) fn bound(&self) -> Vec<Pq<'_>> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| match &self.tsquery {
                Some((at, q)) if *at == i => Pq(Value::Text(q)),
                _ => Pq(*v),
            })
            .collect()
    }
}

pub(super) fn refs<'a>(pq: &'a [Pq<'_>]) -> Vec<&'a (dyn ToSql + Sync)> {
    pq.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

pub(super) fn pg_args<'p>(list: &'p [&'p dyn Param], matched: Option<usize>) -> PgArgs<'p> {
    let values: Vec<Value<'p>> = list.iter().map(|p| p.value()).collect();
    let tsquery = matched.and_then(|i| match values.get(i) {
        Some(Value::Text(q)) => Some((i, fts::tsquery(q))),
        _ => None,
    });
    PgArgs { values, tsquery }
}

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Pq<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, BoxError> {
        let wrong =
            || -> BoxError { format!("a {} cannot be bound to {ty}", self.0.kind()).into() };
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) => match *ty {
                Type::INT8 => n.to_sql(ty, out),
                Type::INT4 => i32::try_from(n)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(n)?.to_sql(ty, out),
                #[allow(clippy::cast_precision_loss)]
                Type::FLOAT8 => (n as f64).to_sql(ty, out),
                Type::BOOL => (n != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::UNKNOWN => n.to_string().to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                #[allow(clippy::cast_possible_truncation)]
                Type::FLOAT4 => (f as f32).to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => {
                    s.to_sql(ty, out)
                }
                Type::JSON => {
                    out.extend_from_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                Type::JSONB => {
                    out.extend_from_slice(&[1]);
                    out.extend_from_slice(s.as_bytes());
                    Ok(IsNull::No)
                }
                Type::INT8 => s.parse::<i64>()?.to_sql(ty, out),
                _ => Err(wrong()),
            },
            Value::Blob(b) => match *ty {
                Type::BYTEA => b.to_sql(ty, out),
                _ => Err(wrong()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// A PostgreSQL column read as a [`Value`], whatever its type.
struct Any<'a>(Value<'a>);

impl<'a> FromSql<'a> for Any<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Self, BoxError> {
        Ok(Any(match *ty {
            Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::INT2 => Value::Int(i16::from_sql(ty, raw)?.into()),
            Type::INT4 => Value::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::OID => Value::Int(u32::from_sql(ty, raw)?.into()),
            Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)?.into()),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::NUMERIC => numeric(raw)?,
            Type::BYTEA => Value::Blob(raw),
            Type::JSONB => Value::Text(std::str::from_utf8(raw.get(1..).unwrap_or_default())?),
            _ => Value::Text(<&str>::from_sql(ty, raw)?),
        }))
    }

    fn from_sql_null(_: &Type) -> std::result::Result<Self, BoxError> {
        Ok(Any(Value::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// PostgreSQL's binary `numeric` (what `sum(bigint)` returns): base-10000
/// digits, a weight and a sign. Whole numbers read as integers.
pub(super) fn numeric(raw: &[u8]) -> std::result::Result<Value<'static>, BoxError> {
    let word = |i: usize| -> std::result::Result<i16, BoxError> {
        let b = raw.get(i * 2..i * 2 + 2).ok_or("short numeric")?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    };
    let ndigits = usize::try_from(word(0)?)?;
    let weight = i32::from(word(1)?);
    let sign = u16::from_be_bytes(word(2)?.to_be_bytes());
    let scale = word(3)?;
    if sign == 0xC000 {
        return Ok(Value::Null);
    }
    let mut value = 0f64;
    for d in 0..ndigits {
        let exp = weight - i32::try_from(d)?;
        value += f64::from(word(4 + d)?) * 10_000f64.powi(exp);
    }
    if sign == 0x4000 {
        value = -value;
    }
    #[allow(clippy::cast_possible_truncation)]
    if scale == 0 && value.abs() < 9.0e15 {
        return Ok(Value::Int(value as i64));
    }
    Ok(Value::Real(value))
}
