//! What the settings tree does with every channel's section besides reading it as a field of
//! `Settings`, made for each channel from the list of channels (`channels::each_channel!`,
//! through the `settings!` macro in `config.rs`): so no file of the settings tree names a
//! channel.

use serde::de::DeserializeOwned;

use super::{ConfigError, DEFAULT_TOML, Settings};

/// One channel's section.
pub(super) struct Section {
    /// Its name in the settings (`telegram`, `webhooks`).
    pub(super) name: &'static str,
    /// Reads it on its own from what was loaded, adding each mistake in it to the list.
    pub(super) read: super::mistakes::ReadSection,
    /// Appends it to `check-config`'s TOML: `true` when it is a list (`[[webhooks]]`).
    pub(super) print: fn(&Settings, &mut String) -> Result<bool, ConfigError>,
    /// The values setting `field` of section `section` takes, when they are a fixed set.
    pub(super) values: fn(&str, &str) -> Option<Vec<String>>,
}

/// The values setting `field` of a channel's section `section`, of type `T`, takes when they
/// are a fixed set (`transport`, `locale`, `thread_per`, `feishu.domain`): read from the type
/// itself, as serde lists them when refusing a name it does not know in the section's
/// compiled-in defaults. `None` for any other setting, and for a list section (it has no
/// defaults to try a name in).
pub(super) fn values_of<T: DeserializeOwned>(section: &str, field: &str) -> Option<Vec<String>> {
    let defaults: toml::Table = toml::from_str(DEFAULT_TOML).ok()?;
    let mut table = defaults.get(section)?.as_table()?.clone();
    table.insert(field.to_string(), toml::Value::String(NO_NAME.into()));
    // The message alone, without the key it names after it.
    let refused = T::deserialize(toml::Value::Table(table))
        .err()?
        .message()
        .to_string();
    refused
        .contains(&format!("unknown variant `{NO_NAME}`"))
        .then(|| super::listed(&refused))
}

/// A name no setting of a fixed set takes.
pub(super) const NO_NAME: &str = "\u{0}";
