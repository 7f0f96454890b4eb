//! The effective configuration printed as TOML (what `imrelay check-config` shows), every
//! secret redacted, section by section in the order docs/configuration.md presents them.

use serde::Serialize;

use super::{ConfigError, Settings};

impl Settings {
    /// The effective configuration as TOML, every secret redacted, section by section in the
    /// order docs/configuration.md presents them (an empty list, such as no `[[policy]]`, as
    /// a comment saying so).
    pub fn redacted_toml(&self) -> Result<String, ConfigError> {
        // Every field named (no `..`): a new section cannot be left out of what is printed.
        let Settings {
            server,
            auth,
            interactions,
            hooks,
            mcp,
            store,
            log,
            outbox,
            audit,
            webhooks,
            feishu,
            telegram,
            policy,
            slack,
            wecom,
            dingtalk,
            ntfy,
            discord,
            matrix,
            push,
            passkeys,
            people,
            groups,
            routes,
        } = self;
        let mut out = String::new();
        section(&mut out, "server", server)?;
        section(&mut out, "auth", auth)?;
        section(&mut out, "interactions", interactions)?;
        section(&mut out, "hooks", hooks)?;
        section(&mut out, "mcp", mcp)?;
        section(&mut out, "store", store)?;
        section(&mut out, "audit", audit)?;
        list(&mut out, "policy", policy)?;
        list(&mut out, "people", people)?;
        list(&mut out, "groups", groups)?;
        list(&mut out, "routes", routes)?;
        section(&mut out, "outbox", outbox)?;
        section(&mut out, "log", log)?;
        section(&mut out, "telegram", telegram)?;
        section(&mut out, "feishu", feishu)?;
        section(&mut out, "slack", slack)?;
        section(&mut out, "wecom", wecom)?;
        section(&mut out, "dingtalk", dingtalk)?;
        section(&mut out, "ntfy", ntfy)?;
        section(&mut out, "discord", discord)?;
        section(&mut out, "matrix", matrix)?;
        section(&mut out, "push", push)?;
        section(&mut out, "passkeys", passkeys)?;
        list(&mut out, "webhooks", webhooks)?;
        Ok(out.trim_end().to_string() + "\n")
    }
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
        out.push_str(&format!("# [[{key}]]: none\n\n"));
        return Ok(());
    }
    section(out, key, &items)
}
