//! The effective configuration printed as TOML (what `imrelay check-config` shows), every
//! secret redacted, section by section in the order docs/configuration.md presents them.

use serde::Serialize;

use super::{ConfigError, Settings};

impl Settings {
    /// The effective configuration as TOML, every secret redacted, section by section in the
    /// order docs/configuration.md presents them (an empty list, such as no `[[policy]]`, as
    /// a comment saying so).
    pub fn redacted_toml(&self) -> Result<String, ConfigError> {
        let mut out = String::new();
        section(&mut out, "server", &self.server)?;
        section(&mut out, "auth", &self.auth)?;
        section(&mut out, "interactions", &self.interactions)?;
        section(&mut out, "hooks", &self.hooks)?;
        section(&mut out, "mcp", &self.mcp)?;
        section(&mut out, "store", &self.store)?;
        section(&mut out, "audit", &self.audit)?;
        list(&mut out, "policy", &self.policy)?;
        list(&mut out, "people", &self.people)?;
        list(&mut out, "groups", &self.groups)?;
        list(&mut out, "routes", &self.routes)?;
        section(&mut out, "outbox", &self.outbox)?;
        section(&mut out, "log", &self.log)?;
        // The channels' sections in the registry's order, `[passkeys]` after them, and the
        // channels' lists (`[[webhooks]]`) last, as docs/configuration.md presents them.
        let mut lists = String::new();
        for channel in Self::channel_sections() {
            let mut text = String::new();
            let is_list = (channel.print)(self, &mut text)?;
            if is_list { &mut lists } else { &mut out }.push_str(&text);
        }
        section(&mut out, "passkeys", &self.passkeys)?;
        out.push_str(&lists);
        Ok(out.trim_end().to_string() + "\n")
    }
}

/// Appends `value` to `out` under `key`: as `[[key]]` entries when it is a list (`true`, and a
/// comment when it is empty), else as `[key]`.
pub(super) fn any<T: Serialize>(
    out: &mut String,
    key: &str,
    value: &T,
) -> Result<bool, ConfigError> {
    match toml::Value::try_from(value) {
        Ok(toml::Value::Array(items)) if items.is_empty() => {
            none(out, key);
            Ok(true)
        }
        Ok(toml::Value::Array(_)) => section(out, key, value).map(|()| true),
        _ => section(out, key, value).map(|()| false),
    }
}

/// The comment that list `key` has no entries (an empty array cannot follow a table in TOML).
fn none(out: &mut String, key: &str) {
    out.push_str(&format!("# [[{key}]]: none\n\n"));
}

/// Appends `[key]` (its tables, `[key.sub]`, after it) to `out`.
fn section<T: Serialize>(out: &mut String, key: &str, value: &T) -> Result<(), ConfigError> {
    let one: std::collections::BTreeMap<&str, &T> = [(key, value)].into();
    let text = toml::to_string_pretty(&one).map_err(|e| ConfigError::Invalid(e.to_string()))?;
    out.push_str(&text);
    out.push('\n');
    Ok(())
}

/// Appends `[[key]]` for each of `items` to `out`, or a comment that there are none (an
/// empty array cannot follow a table in TOML).
fn list<T: Serialize>(out: &mut String, key: &str, items: &[T]) -> Result<(), ConfigError> {
    if items.is_empty() {
        none(out, key);
        return Ok(());
    }
    section(out, key, &items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every section of the settings is printed, the channels' too: one left out of
    /// `redacted_toml` fails here.
    #[test]
    fn every_section_is_printed() {
        let mut s = Settings::defaults().unwrap();
        let printed = s.redacted_toml().unwrap();
        let whole = toml::Value::try_from(&s).unwrap();
        let keys: Vec<&String> = whole.as_table().unwrap().keys().collect();
        assert!(keys.len() > 20, "{keys:?}");
        for key in keys {
            let shown = [
                format!("[{key}]"),
                format!("[{key}."),
                format!("# [[{key}]]: none"),
            ];
            assert!(
                shown
                    .iter()
                    .any(|l| printed.lines().any(|p| p.starts_with(l.as_str()))),
                "{key} is not printed:\n{printed}"
            );
        }
        // A list with entries is printed as its entries, and what is printed reads back.
        s.webhooks = toml::from_str::<toml::Table>(
            "[[webhooks]]\nname = \"ci\"\nurl = \"https://ci.example.com/hook\"\nsecret = \"s\"\n",
        )
        .unwrap()
        .remove("webhooks")
        .unwrap()
        .try_into()
        .unwrap();
        let printed = s.redacted_toml().unwrap();
        assert!(printed.contains("[[webhooks]]\nname = \"ci\""), "{printed}");
        assert!(printed.find("[passkeys]") < printed.find("[[webhooks]]"));
        assert!(printed.find("[telegram]") < printed.find("[push]"));
    }
}
