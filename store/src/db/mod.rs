//! One connection type over both backends: [`Db`] is what a store
//! function is handed (a SQLite connection or transaction, or a PostgreSQL
//! transaction), with the three calls the store makes of it (`execute`,
//! `query_row`, `query_all`), parameters as [`Param`]s and columns read
//! through [`Row::get`].
//!
//! SQL is written once in SQLite's spelling (`?1` placeholders); on
//! PostgreSQL the placeholders become `$1` and each statement is prepared
//! once per connection. What differs between the two in more than
//! placeholders (full-text search, ids, JSON) asks [`Db::dialect`] and
//! keeps both texts side by side. Values convert loosely, as SQLite's do: an
//! integer binds to a `bigint`, `integer` or `boolean` parameter, and a
//! `bigint` or `numeric` column reads as an `i64`, so a store function
//! needs no type annotations per backend.

use std::cell::RefCell;
use std::collections::HashMap;
use std::error::Error as StdError;

use postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::{Error, Result, fts};

/// Which SQL a [`Db`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection (reads) or a transaction (writes) on either backend.
pub struct Db<'a>(Conn<'a>);

enum Conn<'a> {
    Sqlite(&'a rusqlite::Connection),
    Postgres(RefCell<Pg<'a>>),
}

/// Prepared statements of one PostgreSQL connection, by their SQLite text,
/// with the parameter a full-text `MATCH` takes (converted when bound).
pub(crate) type Statements = HashMap<String, (postgres::Statement, Option<usize>)>;

pub(crate) struct Pg<'a> {
    pub(crate) tx: postgres::Transaction<'a>,
    pub(crate) statements: &'a mut Statements,
    /// Which store (process) the transaction is of, for its notices.
    pub(crate) origin: &'a str,
}

impl<'a> Db<'a> {
    /// A SQLite connection (or transaction: it derefs to one).
    pub fn sqlite(conn: &'a rusqlite::Connection) -> Self {
        Db(Conn::Sqlite(conn))
    }

    pub(crate) fn postgres(
        tx: postgres::Transaction<'a>,
        statements: &'a mut Statements,
        origin: &'a str,
    ) -> Self {
        Db(Conn::Postgres(RefCell::new(Pg {
            tx,
            statements,
            origin,
        })))
    }

    /// The store this transaction is of ([`crate::notify`]); empty on SQLite.
    pub(crate) fn origin(&self) -> String {
        match &self.0 {
            Conn::Sqlite(_) => String::new(),
            Conn::Postgres(pg) => pg.borrow().origin.to_string(),
        }
    }

    pub(crate) fn into_postgres(self) -> Option<postgres::Transaction<'a>> {
        match self.0 {
            Conn::Postgres(pg) => Some(pg.into_inner().tx),
            Conn::Sqlite(_) => None,
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self.0 {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection underneath, for what only SQLite has (its
    /// pragmas, query plans); `None` on PostgreSQL.
    pub fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match self.0 {
            Conn::Sqlite(c) => Some(c),
            Conn::Postgres(_) => None,
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        let list = params.list();
        match &self.0 {
            Conn::Sqlite(c) => Ok(c
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(sqlite_args(&list)))?),
            Conn::Postgres(pg) => {
                let n = pg
                    .borrow_mut()
                    .run(sql, &list, |tx, stmt, args| tx.execute(stmt, args))?;
                Ok(usize::try_from(n).unwrap_or(usize::MAX))
            }
        }
    }

    /// Runs several statements without parameters (a migration, a
    /// maintenance batch).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.0 {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Postgres(pg) => Ok(pg.borrow_mut().tx.batch_execute(sql)?),
        }
    }

    /// The first row `sql` returns, mapped by `f`; [`Error::NoRow`] when
    /// there is none (see [`Optional`]).
    pub fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        let list = params.list();
        match &self.0 {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(sqlite_args(&list)))?;
                match rows.next()? {
                    Some(r) => f(&Row(RowRef::Sqlite(r))),
                    None => Err(Error::NoRow),
                }
            }
            Conn::Postgres(pg) => {
                let rows = pg
                    .borrow_mut()
                    .run(sql, &list, |tx, stmt, args| tx.query(stmt, args))?;
                match rows.first() {
                    Some(r) => f(&Row(RowRef::Postgres(r))),
                    None => Err(Error::NoRow),
                }
            }
        }
    }

    /// Every row `sql` returns, each mapped by `f`. Statements are cached
    /// on the connection: the same queries run again and again.
    pub fn query_all<T>(
        &self,
        sql: &str,
        params: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let list = params.list();
        match &self.0 {
            Conn::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(rusqlite::params_from_iter(sqlite_args(&list)))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(f(&Row(RowRef::Sqlite(r)))?);
                }
                Ok(out)
            }
            Conn::Postgres(pg) => {
                let rows = pg
                    .borrow_mut()
                    .run(sql, &list, |tx, stmt, args| tx.query(stmt, args))?;
                rows.iter().map(|r| f(&Row(RowRef::Postgres(r)))).collect()
            }
        }
    }
}

impl<'a> Pg<'a> {
    /// `sql` prepared (once per connection) and run by `call` with `list`
    /// bound, the full-text query converted.
    fn run<R>(
        &mut self,
        sql: &str,
        list: &[&dyn Param],
        call: impl FnOnce(
            &mut postgres::Transaction<'a>,
            &postgres::Statement,
            &[&(dyn ToSql + Sync)],
        ) -> std::result::Result<R, postgres::Error>,
    ) -> Result<R> {
        let (stmt, matched) = self.prepare(sql)?;
        let args = pg_args(list, matched);
        let bound = args.bound();
        Ok(call(&mut self.tx, &stmt, &refs(&bound))?)
    }

    fn prepare(&mut self, sql: &str) -> Result<(postgres::Statement, Option<usize>)> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let (text, matched) = fts::rewrite(&to_postgres(sql));
        let stmt = self.tx.prepare(&text)?;
        self.statements
            .insert(sql.to_owned(), (stmt.clone(), matched));
        Ok((stmt, matched))
    }
}

/// A statement in SQLite's spelling as PostgreSQL's: `?1` (and bare `?`)
/// placeholders become `$1`, SQLite's `char(n)` PostgreSQL's `chr(n)`, and
/// `CROSS JOIN … ON` (SQLite's inner join in a fixed order) a `JOIN`;
/// outside quoted strings and identifiers.
pub(crate) fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    let mut next = 1u32;
    let mut chars = sql.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some((_, d)) = chars.peek().filter(|(_, d)| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    out.push_str(&next.to_string());
                    next += 1;
                } else {
                    next = digits.parse::<u32>().map_or(next, |n| n + 1);
                    out.push_str(&digits);
                }
            }
            (None, _) if !out.ends_with(|p: char| p.is_alphanumeric() || p == '_') => {
                // SQLite's words PostgreSQL spells otherwise.
                let rest = &sql[i..];
                match [("char(", "chr("), ("CROSS JOIN", "JOIN")]
                    .into_iter()
                    .find(|(from, _)| {
                        rest.get(..from.len())
                            .is_some_and(|r| r.eq_ignore_ascii_case(from))
                    }) {
                    Some((from, to)) => {
                        out.push_str(to);
                        for _ in 1..from.len() {
                            chars.next();
                        }
                    }
                    None => out.push(c),
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

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
    fn kind(&self) -> &'static str {
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

/// One result row.
pub struct Row<'r>(RowRef<'r>);

enum RowRef<'r> {
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

/// A column value a [`Row`] converts to.
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

/// A parameter bound for rusqlite.
struct Sq<'p>(&'p dyn Param);

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

fn sqlite_args<'p>(list: &[&'p dyn Param]) -> Vec<Sq<'p>> {
    list.iter().map(|p| Sq(*p)).collect()
}

/// A parameter bound for PostgreSQL: converted to the type the server
/// inferred for its placeholder.
#[derive(Debug)]
struct Pq<'p>(Value<'p>);

struct PgArgs<'p> {
    values: Vec<Value<'p>>,
    /// The full-text query, as PostgreSQL's `tsquery` text.
    tsquery: Option<(usize, String)>,
}

impl PgArgs<'_> {
    fn bound(&self) -> Vec<Pq<'_>> {
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

fn refs<'a>(pq: &'a [Pq<'_>]) -> Vec<&'a (dyn ToSql + Sync)> {
    pq.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

fn pg_args<'p>(list: &'p [&'p dyn Param], matched: Option<usize>) -> PgArgs<'p> {
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
fn numeric(raw: &[u8]) -> std::result::Result<Value<'static>, BoxError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_become_postgres() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE a = ?1 AND b = ?2 OR c = ?1"),
            "SELECT a FROM t WHERE a = $1 AND b = $2 OR c = $1"
        );
        assert_eq!(to_postgres("VALUES (?, ?)"), "VALUES ($1, $2)");
        assert_eq!(
            to_postgres("SELECT '?1', \"a?\" WHERE x = ?3"),
            "SELECT '?1', \"a?\" WHERE x = $3"
        );
        assert_eq!(
            to_postgres("SELECT a || char(10) || b, 'char(10)', varchar(3)"),
            "SELECT a || chr(10) || b, 'char(10)', varchar(3)"
        );
        assert_eq!(
            to_postgres("FROM a CROSS JOIN b ON b.id = a.id"),
            "FROM a JOIN b ON b.id = a.id"
        );
    }

    #[test]
    fn numeric_reads_whole_and_fractional() {
        // 12345678 = 1234 * 10000 + 5678, weight 1, scale 0.
        let mut raw = Vec::new();
        for w in [2i16, 1, 0, 0, 1234, 5678] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(numeric(&raw).unwrap(), Value::Int(12_345_678));
        // -1.5 = 1 and 5000 * 10000^-1, weight 0, scale 1.
        let mut raw = Vec::new();
        for w in [2i16, 0, 0x4000, 1, 1, 5000] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        assert_eq!(numeric(&raw).unwrap(), Value::Real(-1.5));
    }
}
