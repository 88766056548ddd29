//! Rows read into structs by the order of their columns.

/// `$ty` from the row `$r`, one column per field in the order the fields
/// are named: `field` reads its column as is, `field = f` reads it with
/// `f(row, index)`. The indexes are counted here, never written out, so a
/// struct and its `SELECT` list only have to agree on the order. Used
/// where `?` returns the store's `Result`.
macro_rules! read_row {
    ($r:expr => $ty:ident { $($field:ident $(= $with:expr)?),* $(,)? }) => {{
        let row = $r;
        let mut _i = 0usize;
        $ty {
            $($field: {
                let v = $crate::db::read_row!(@column row, _i $(, $with)?);
                _i += 1;
                v
            },)*
        }
    }};
    (@column $r:expr, $i:expr) => { $r.get($i)? };
    (@column $r:expr, $i:expr, $with:expr) => { $with($r, $i)? };
}

pub(crate) use read_row;
