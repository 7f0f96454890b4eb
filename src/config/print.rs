//! Writing settings back as TOML, section by section, as `imrelay check-config` prints the
//! effective settings.

use serde::Serialize;

use super::ConfigError;

/// Appends `[key]` (its tables, `[key.sub]`, after it) to `out`.
pub(super) fn section<T: Serialize>(
    out: &mut String,
    key: &str,
    value: &T,
) -> Result<(), ConfigError> {
    let one: std::collections::BTreeMap<&str, &T> = [(key, value)].into();
    let text = toml::to_string_pretty(&one).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    out.push_str(&text);
    out.push('\n');
    Ok(())
}

/// Appends `[[key]]` for each of `items` to `out`, or a comment that there are none (an
/// empty array cannot follow a table in TOML).
pub(super) fn list<T: Serialize>(
    out: &mut String,
    key: &str,
    items: &[T],
) -> Result<(), ConfigError> {
    if items.is_empty() {
        out.push_str(&format!("# [[{key}]]: none\n\n"));
        return Ok(());
    }
    section(out, key, &items)
}
