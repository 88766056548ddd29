use super::backend::numeric;
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
