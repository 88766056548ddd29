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

mod backend;
mod columns;
mod values;

use std::cell::RefCell;
use std::collections::HashMap;

use postgres::types::ToSql;

use crate::{Error, Result, fts};
pub use backend::Row;
use backend::{RowRef, pg_args, refs, sqlite_args};
pub(crate) use columns::read_row;
pub use values::{FromValue, Optional, Param, Params, Value};

/// Which SQL a [`Db`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// `col IN (…)` over the ids given as a JSON array in parameter `n`, on
/// either backend: one statement whatever the number of ids.
pub(crate) fn id_in_json(dialect: Dialect, col: &str, n: usize) -> String {
    match dialect {
        Dialect::Sqlite => format!("{col} IN (SELECT value FROM json_each(?{n}))"),
        Dialect::Postgres => {
            format!("{col} IN (SELECT value::bigint FROM jsonb_array_elements_text(?{n}::jsonb))")
        }
    }
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

#[cfg(test)]
mod tests;
