//! Canonical JSON: object keys sorted at every level, so equal values encode equally
//! whatever order their keys arrived in (the audit hashes, input digests).

use serde_json::{Map, Value};

/// JSON with object keys sorted at every level, so equal values encode equally whatever
/// order their keys arrived in.
pub fn canonical_json(v: &Value) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and JSON is UTF-8.
    let _ = write_canonical_json(v, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Writes [`canonical_json`] of `v` into `w` (e.g. straight into a hasher).
pub(crate) fn write_canonical_json<W: std::io::Write>(v: &Value, w: &mut W) -> std::io::Result<()> {
    match v {
        Value::Object(m) => write_canonical_object(m, w),
        Value::Array(a) => {
            w.write_all(b"[")?;
            for (n, item) in a.iter().enumerate() {
                if n > 0 {
                    w.write_all(b",")?;
                }
                write_canonical_json(item, w)?;
            }
            w.write_all(b"]")
        }
        other => serde_json::to_writer(&mut *w, other).map_err(std::io::Error::other),
    }
}

pub(super) fn write_canonical_object<W: std::io::Write>(
    m: &Map<String, Value>,
    w: &mut W,
) -> std::io::Result<()> {
    let mut entries: Vec<(&String, &Value)> = m.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    w.write_all(b"{")?;
    for (n, (k, v)) in entries.into_iter().enumerate() {
        if n > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, k).map_err(std::io::Error::other)?;
        w.write_all(b":")?;
        write_canonical_json(v, w)?;
    }
    w.write_all(b"}")
}
