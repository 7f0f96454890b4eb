//! One vocabulary of channel settings: the same idea has the same name on every channel
//! (`api_url`, `transport`, `chats`, `inbound_path`, `gateway_url`; ntfy's topics are its
//! `chats` too). The names each channel
//! had before still work: a file key or an `IMRELAY__` variable under an old name is read
//! under the new one, with one warning at start-up (and in `check-config`) naming the new
//! spelling.

use std::collections::HashMap;

use super::ENV_PREFIX;

/// Every renamed setting: its section, its old name and its name now.
pub(crate) const RENAMED: &[(&str, &str, &str)] = &[
    ("telegram", "mode", "transport"),
    ("telegram", "webhook_path", "inbound_path"),
    ("slack", "mode", "transport"),
    ("slack", "api_base", "api_url"),
    ("slack", "channels", "chats"),
    ("slack", "events_path", "inbound_path"),
    ("feishu", "mode", "transport"),
    ("feishu", "base_url", "api_url"),
    ("feishu", "receivers", "chats"),
    ("feishu", "callback_path", "inbound_path"),
    ("dingtalk", "api_base", "api_url"),
    ("dingtalk", "gateway_base", "gateway_url"),
    ("dingtalk", "conversations", "chats"),
    ("wecom", "url", "api_url"),
    ("wecom", "callback_path", "inbound_path"),
    ("ntfy", "topics", "chats"),
];

/// The warning for `section.old` read as `section.new` from `place`.
fn renamed(section: &str, old: &str, new: &str, place: &str, both: bool) -> String {
    if both {
        format!(
            "`{section}.{old}` and `{section}.{new}` are both set in {place}: `{section}.{old}` \
             is the old name of `{section}.{new}`, which wins; remove `{old}`"
        )
    } else {
        format!(
            "`{section}.{old}` in {place} is now called `{section}.{new}`: it is read as \
             `{new}`; rename it (the old name may go in a later release)"
        )
    }
}

/// Renames the old keys of the file's `table` (read from `path`) to the new ones, in place:
/// one warning each.
pub(super) fn rename_in_file(table: &mut toml::Table, path: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    for (section, old, new) in RENAMED {
        let Some(toml::Value::Table(t)) = table.get_mut(*section) else {
            continue;
        };
        let Some(value) = t.remove(*old) else {
            continue;
        };
        let both = t.contains_key(*new);
        if !both {
            t.insert((*new).to_string(), value);
        }
        warnings.push(renamed(section, old, new, path, both));
    }
    warnings
}

/// Renames the `IMRELAY__<SECTION>__<OLD>` variables of `env` to the new names, in place:
/// one warning each.
pub(super) fn rename_in_env(env: &mut HashMap<String, String>) -> Vec<String> {
    let mut warnings = Vec::new();
    for (section, old, new) in RENAMED {
        let old_name = format!("{ENV_PREFIX}__{section}__{old}").to_uppercase();
        let Some(given) = env.keys().find(|k| k.to_uppercase() == old_name).cloned() else {
            continue;
        };
        let new_name = format!("{ENV_PREFIX}__{section}__{new}").to_uppercase();
        let both = env.keys().any(|k| k.to_uppercase() == new_name);
        let value = env.remove(&given).unwrap_or_default();
        if !both {
            env.insert(new_name.clone(), value);
        }
        warnings.push(renamed(
            section,
            old,
            new,
            &format!("the environment variable {given} (now {new_name})"),
            both,
        ));
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_names_are_read_as_new_ones_with_a_warning() {
        let mut t: toml::Table = toml::from_str(
            "[slack]\nchannels = [\"C1\"]\n[feishu]\nreceivers = []\nchats = [\"chat_id:oc_1\"]",
        )
        .unwrap();
        let w = rename_in_file(&mut t, "imrelay.toml");
        assert_eq!(t["slack"]["chats"].as_array().unwrap().len(), 1);
        assert!(t["slack"].get("channels").is_none());
        assert_eq!(t["feishu"]["chats"].as_array().unwrap().len(), 1);
        assert!(
            w.iter().any(|w| w.contains(
                "`slack.channels` in imrelay.toml is now called `slack.chats`: it is read as `chats`"
            )),
            "{w:?}"
        );
        assert!(
            w.iter()
                .any(|w| w.contains("`feishu.receivers` and `feishu.chats` are both set")),
            "{w:?}"
        );
        let mut env = HashMap::from([("IMRELAY__TELEGRAM__MODE".to_string(), "webhook".into())]);
        let w = rename_in_env(&mut env);
        assert_eq!(env["IMRELAY__TELEGRAM__TRANSPORT"], "webhook");
        assert!(w[0].contains("IMRELAY__TELEGRAM__MODE"), "{w:?}");
    }

    #[test]
    fn every_new_name_is_a_known_setting_and_no_old_one_is() {
        let defaults: toml::Table = toml::from_str(super::super::DEFAULT_TOML).unwrap();
        for (section, old, new) in RENAMED {
            let s = defaults[*section].as_table().unwrap();
            assert!(
                s.contains_key(*new),
                "{section}.{new} is not in default.toml"
            );
            assert!(
                !s.contains_key(*old),
                "{section}.{old} is still in default.toml"
            );
        }
    }
}

#[cfg(test)]
mod every_alias {
    use super::*;
    use crate::config::Settings;

    /// Each old name, set in a file to its new name's default, still loads, with the warning.
    #[test]
    fn each_old_name_still_starts_the_service_with_its_warning() {
        let defaults: toml::Table = toml::from_str(super::super::DEFAULT_TOML).unwrap();
        for (section, old, new) in RENAMED {
            let value = &defaults[*section][*new];
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("imrelay.toml");
            std::fs::write(&path, format!("[{section}]\n{old} = {value}\n")).unwrap();
            let loaded = Settings::load_from(Some(&path), HashMap::new())
                .unwrap_or_else(|e| panic!("{section}.{old}: {e}"));
            assert!(
                loaded.warnings.iter().any(|w| w.contains(&format!(
                    "`{section}.{old}` in {} is now called `{section}.{new}`",
                    path.display()
                ))),
                "{section}.{old}: {:?}",
                loaded.warnings
            );
            let env = HashMap::from([(
                format!("IMRELAY__{section}__{old}").to_uppercase(),
                match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Array(_) => String::new(),
                    other => other.to_string(),
                },
            )]);
            let loaded = Settings::load_from(None, env)
                .unwrap_or_else(|e| panic!("IMRELAY__{section}__{old}: {e}"));
            assert!(
                loaded
                    .warnings
                    .iter()
                    .any(|w| w.contains(&format!("`{section}.{new}`"))),
                "{section}.{old}: {:?}",
                loaded.warnings
            );
        }
    }
}
