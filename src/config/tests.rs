//! The settings tree's own tests: the defaults as documented, where each value is read
//! from, and the checks across sections.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

#[test]
fn defaults_load_and_match_the_documented_values() {
    let s = Settings::defaults().unwrap();
    assert_eq!(s.server.listen.to_string(), "127.0.0.1:8787");
    assert_eq!(s.interactions.approval_timeout_secs, 300);
    assert_eq!(s.interactions.question_timeout_secs, 600);
    assert_eq!(s.interactions.max_timeout_secs, 3600);
    assert_eq!(s.interactions.retention_hours, 24);
    assert_eq!(s.hooks.claude_code.timeout_secs, 590);
    assert_eq!(s.hooks.claude_code.on_timeout, OnTimeout::Deny);
    assert_eq!(s.store.backend, Backend::Sqlite);
    assert_eq!(s.log.format, LogFormat::Text);
}

/// Every key under `v` as (section, key), sections dotted (`hooks.claude_code`).
fn keys(v: &toml::Value, section: &str, out: &mut Vec<(String, String)>) {
    let Some(table) = v.as_table() else { return };
    for (k, child) in table {
        match child {
            toml::Value::Table(_) if section.is_empty() => keys(child, k, out),
            toml::Value::Table(_) => keys(child, &format!("{section}.{k}"), out),
            _ => out.push((section.to_string(), k.clone())),
        }
    }
}

/// The text of `doc` under the heading naming `title`, up to the next heading.
fn doc_section(doc: &str, title: &str) -> String {
    let mut lines = doc
        .lines()
        .skip_while(|l| !(l.starts_with('#') && l.contains(title)));
    assert!(
        lines.next().is_some(),
        "docs/configuration.md has no heading {title}"
    );
    lines
        .take_while(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_setting_is_in_the_defaults_file_and_documented() {
    let doc = include_str!("../../docs/configuration.md");
    let defaults: toml::Value = toml::from_str(DEFAULT_TOML).unwrap();
    let effective = toml::Value::try_from(Settings::defaults().unwrap()).unwrap();
    let mut all = Vec::new();
    keys(&effective, "", &mut all);
    for (section, key) in all.iter().filter(|(s, _)| !s.is_empty()) {
        let mut table = &defaults;
        for part in section.split('.') {
            table = &table[part];
        }
        assert!(
            table.get(key).is_some(),
            "{section}.{key} is missing from config/default.toml"
        );
        assert!(
            doc_section(doc, &format!("`[{section}]`")).contains(&format!("`{key}`")),
            "{section}.{key} is not in docs/configuration.md"
        );
    }
    // Webhook targets: the commented example in the defaults, and the table.
    let target: crate::channels::webhook::WebhookSettings =
        toml::from_str("name = \"x\"\nurl = \"http://x\"\nsecret = \"whsec_x\"").unwrap();
    let mut target_keys = Vec::new();
    keys(
        &toml::Value::try_from(target).unwrap(),
        "webhooks",
        &mut target_keys,
    );
    assert!(target_keys.len() >= 8, "{target_keys:?}");
    for (_, key) in target_keys {
        assert!(
            DEFAULT_TOML.contains(&format!("# {key} =")),
            "webhooks.{key} is missing from config/default.toml"
        );
        assert!(
            doc_section(doc, "`[[webhooks]]`").contains(&format!("`{key}`")),
            "webhooks.{key} is not in docs/configuration.md"
        );
    }
}

#[test]
fn every_policy_key_is_in_the_defaults_file_and_documented() {
    let doc = include_str!("../../docs/configuration.md");
    let rule: policy::PolicyRuleSettings = toml::from_str("name = \"x\"\nmessage = \"m\"").unwrap();
    let mut rule_keys = Vec::new();
    keys(
        &toml::Value::try_from(rule).unwrap(),
        "policy",
        &mut rule_keys,
    );
    assert!(rule_keys.len() >= 8, "{rule_keys:?}");
    for (_, key) in rule_keys {
        assert!(
            DEFAULT_TOML.contains(&format!("# {key} =")),
            "policy.{key} is missing from config/default.toml"
        );
        assert!(
            doc_section(doc, "`[[policy]]`").contains(&format!("`{key}`")),
            "policy.{key} is not in docs/configuration.md"
        );
    }
}

#[test]
fn environment_wins_and_lists_split() {
    let s = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__SERVER__LISTEN", "127.0.0.1:9000"),
            (
                "IMRELAY__AUTH__AGENT_TOKENS",
                "agent-token-one-01, agent-token-two-02",
            ),
            ("IMRELAY__AUTH__OPERATOR_TOKENS", "operator-token-0123"),
            ("IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS", "77"),
            ("IMRELAY__HOOKS__CLAUDE_CODE__ON_TIMEOUT", "ask"),
            ("IMRELAY_CONFIG", "ignored.toml"),
        ]),
    )
    .unwrap();
    assert_eq!(s.server.listen.port(), 9000);
    assert_eq!(s.auth.agent_tokens.len(), 2);
    assert_eq!(s.auth.agent_tokens[1].expose(), "agent-token-two-02");
    assert_eq!(s.auth.operator_tokens[0].expose(), "operator-token-0123");
    assert_eq!(s.interactions.approval_timeout_secs, 77);
    assert_eq!(s.hooks.claude_code.on_timeout, OnTimeout::Ask);
}

#[test]
fn unknown_keys_are_errors_naming_the_key() {
    let err = Settings::load_with_env(None, env(&[("IMRELAY__SERVER__LISTN", "x")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("listn"), "{err}");
}

#[test]
fn unknown_keys_in_a_file_are_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(
        &path,
        "[hooks.claude_code]\ntimeout_secs = 100\non_timeuot = \"ask\"\n",
    )
    .unwrap();
    let err = Settings::load_with_env(Some(&path), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("on_timeuot"), "{err}");
}

#[test]
fn durations_beyond_a_year_are_refused_naming_the_key() {
    for (var, key) in [
        (
            "IMRELAY__INTERACTIONS__RETENTION_HOURS",
            "interactions.retention_hours",
        ),
        (
            "IMRELAY__INTERACTIONS__MAX_TIMEOUT_SECS",
            "interactions.max_timeout_secs",
        ),
        (
            "IMRELAY__INTERACTIONS__APPROVAL_TIMEOUT_SECS",
            "interactions.approval_timeout_secs",
        ),
        (
            "IMRELAY__HOOKS__CLAUDE_CODE__TIMEOUT_SECS",
            "hooks.claude_code.timeout_secs",
        ),
    ] {
        let err = Settings::load_with_env(None, env(&[(var, "18446744073709551615")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
        assert!(err.contains("at most"), "{err}");
    }
    let s = Settings::load_with_env(
        None,
        env(&[("IMRELAY__INTERACTIONS__RETENTION_HOURS", "8760")]),
    )
    .unwrap();
    assert_eq!(s.interactions.retention_hours, 8760);
}

#[test]
fn connection_bounds_out_of_range_are_refused_naming_the_key() {
    for (var, value, key) in [
        (
            "IMRELAY__SERVER__MAX_CONNECTIONS",
            "0",
            "server.max_connections",
        ),
        (
            "IMRELAY__SERVER__MAX_CONNECTIONS",
            "1000001",
            "server.max_connections",
        ),
        (
            "IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS",
            "0",
            "server.header_read_timeout_secs",
        ),
        (
            "IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS",
            "3601",
            "server.header_read_timeout_secs",
        ),
    ] {
        let err = Settings::load_with_env(None, env(&[(var, value)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{value}: {err}");
        assert!(err.contains("between 1 and"), "{value}: {err}");
    }
    let s = Settings::load_with_env(
        None,
        env(&[
            ("IMRELAY__SERVER__MAX_CONNECTIONS", "1000000"),
            ("IMRELAY__SERVER__HEADER_READ_TIMEOUT_SECS", "3600"),
        ]),
    )
    .unwrap();
    assert_eq!(s.server.max_connections, 1_000_000);
    assert_eq!(s.server.header_read_timeout_secs, 3600);
}

#[test]
fn non_loopback_without_tokens_is_refused() {
    let err = Settings::load_with_env(None, env(&[("IMRELAY__SERVER__LISTEN", "0.0.0.0:8787")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("auth.agent_tokens"), "{err}");
    assert!(err.contains("auth.operator_tokens"), "{err}");
    assert!(
        Settings::load_with_env(
            None,
            env(&[
                ("IMRELAY__SERVER__LISTEN", "0.0.0.0:8787"),
                ("IMRELAY__AUTH__AGENT_TOKENS", "agent-token-0123456789"),
                (
                    "IMRELAY__AUTH__OPERATOR_TOKENS",
                    "operator-token-0123456789"
                ),
            ])
        )
        .is_ok()
    );
}

#[test]
fn secrets_are_redacted() {
    let secret = "hunter2-hunter2-hunter2";
    let s =
        Settings::load_with_env(None, env(&[("IMRELAY__AUTH__OPERATOR_TOKENS", secret)])).unwrap();
    let toml = s.redacted_toml().unwrap();
    assert!(!toml.contains(secret));
    assert!(toml.contains("[redacted]"));
    assert!(!format!("{s:?}").contains(secret));
}

#[test]
fn two_channels_on_one_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    let config = |feishu_path: &str| {
        format!(
            r#"
[telegram]
enabled = true
token = "123456:ABC-def_123"
chats = [1]
approvers = [1]
mode = "webhook"
webhook_url = "https://relay.example.com/hooks/in"
webhook_path = "/hooks/in"

[feishu]
enabled = true
mode = "webhook"
app_id = "cli_1"
app_secret = "s"
verification_token = "v"
receivers = [{{ type = "chat_id", id = "oc_1" }}]
approvers = ["ou_1"]
callback_path = "{feishu_path}"
"#
        )
    };
    std::fs::write(&path, config("/hooks/in")).unwrap();
    let err = Settings::load_with_env(Some(&path), env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("both \"/hooks/in\""), "{err}");
    std::fs::write(&path, config("/feishu/callback")).unwrap();
    Settings::load_with_env(Some(&path), env(&[])).unwrap();
}

#[test]
fn files_override_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[interactions]\napproval_timeout_secs = 42\n").unwrap();
    let s = Settings::load_with_env(Some(&path), env(&[])).unwrap();
    assert_eq!(s.interactions.approval_timeout_secs, 42);
    assert_eq!(s.interactions.question_timeout_secs, 600);
    assert!(Settings::load_with_env(Some(&dir.path().join("missing.toml")), env(&[])).is_err());
}
/// The message of the error loading `file` with the variables `pairs`.
fn error_of(file: Option<&Path>, pairs: &[(&str, &str)]) -> String {
    Settings::load_with_env(file, env(pairs))
        .unwrap_err()
        .to_string()
}

/// The error loading `auth` from a file with these lines, or `None` if it loads.
fn auth_file_error(lines: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, format!("[auth]\n{lines}\n")).unwrap();
    Settings::load_with_env(Some(&path), env(&[]))
        .err()
        .map(|e| e.to_string())
}

#[test]
fn bad_tokens_are_refused_by_position_never_by_value() {
    let good = "0123456789abcdef";
    assert_eq!(
        auth_file_error(&format!("agent_tokens = [\"{good}\"]")),
        None
    );
    for (tokens, problem) in [
        ("[\"0123456789abcde\"]", "shorter than 16 characters"),
        ("[\" \"]", "whitespace"),
        ("[\"0123456789 abcdef\"]", "whitespace"),
        ("[\"0123456789abcdef\\t\"]", "whitespace"),
        ("[\"0123456789abcdef\\u0007\"]", "printable ASCII"),
        ("[\"0123456789abcdéf\"]", "printable ASCII"),
        ("[\"\"]", "empty"),
        ("[\"replace-with-an-agent-token\"]", "placeholder"),
    ] {
        let err = auth_file_error(&format!(
            "agent_tokens = [\"{good}-first\"]\noperator_tokens = [\"{good}-ok\", {}]",
            &tokens[1..tokens.len() - 1]
        ))
        .unwrap_or_else(|| panic!("{tokens} was accepted"));
        assert!(err.contains("auth.operator_tokens[1]"), "{err}");
        assert!(err.contains(problem), "{tokens}: {err}");
        assert!(err.contains("openssl rand -hex 32"), "{err}");
        assert!(err.contains("c.toml"), "names the file: {err}");
        assert!(!err.contains(good), "{err}");
    }
}

#[test]
fn one_token_in_both_scopes_is_refused() {
    let shared = "shared-token-0123456789";
    let err = auth_file_error(&format!(
        "agent_tokens = [\"agent-token-0123456789\", \"{shared}\"]\n\
         operator_tokens = [\"{shared}\"]"
    ))
    .unwrap();
    assert!(
        err.contains("auth.agent_tokens[1] is also auth.operator_tokens[0]"),
        "{err}"
    );
    assert!(err.contains("approve its own requests"), "{err}");
    assert!(!err.contains(shared), "{err}");
    // The same from the environment names the variables.
    let err = error_of(
        None,
        &[
            ("IMRELAY__AUTH__AGENT_TOKENS", shared),
            ("IMRELAY__AUTH__OPERATOR_TOKENS", shared),
        ],
    );
    assert!(err.contains("IMRELAY__AUTH__OPERATOR_TOKENS"), "{err}");
    assert!(!err.contains(shared), "{err}");
}

#[test]
fn empty_items_in_environment_lists_are_refused() {
    for value in [
        " ",
        "agent-token-0123456789,",
        "a-token-0123456789,,b-token-0123456789",
    ] {
        let err = error_of(None, &[("IMRELAY__AUTH__AGENT_TOKENS", value)]);
        assert!(err.contains("IMRELAY__AUTH__AGENT_TOKENS"), "{err}");
        assert!(err.contains("is empty"), "{err}");
    }
    // An empty variable is an empty list.
    let s = Settings::load_with_env(None, env(&[("IMRELAY__AUTH__AGENT_TOKENS", "")])).unwrap();
    assert!(s.auth.agent_tokens.is_empty());
}

#[test]
fn errors_name_the_source_and_suggest_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, "[server]\nlisten = \"localhost:8795\"\n").unwrap();
    let err = error_of(Some(&path), &[]);
    assert!(err.contains("server.listen in "), "{err}");
    assert!(err.contains("c.toml"), "{err}");
    assert!(err.contains("listen = \"127.0.0.1:8795\""), "{err}");
    // The environment wins, and is named instead.
    let err = error_of(
        Some(&path),
        &[("IMRELAY__SERVER__LISTEN", "localhost:9000")],
    );
    assert!(
        err.contains("IMRELAY__SERVER__LISTEN=127.0.0.1:9000"),
        "{err}"
    );
    assert!(!err.contains("c.toml"), "{err}");

    let err = error_of(None, &[("IMRELAY__SERVER__LISTN", "x")]);
    assert!(err.contains("IMRELAY__SERVER__LISTN"), "{err}");
    assert!(
        err.contains("did you mean IMRELAY__SERVER__LISTEN"),
        "{err}"
    );
    let err = error_of(None, &[("IMRELAY__SERVER_LISTEN", "x")]);
    assert!(err.contains("separated by `__`"), "{err}");
    assert!(err.contains("IMRELAY__SERVER__LISTEN"), "{err}");

    std::fs::write(&path, "[servr]\nlisten = \"127.0.0.1:1\"\n").unwrap();
    let err = error_of(Some(&path), &[]);
    assert!(err.contains("`servr`"), "{err}");
    assert!(err.contains("did you mean `server`"), "{err}");
}

#[test]
fn every_setting_of_a_fixed_set_of_values_lists_them() {
    assert_eq!(
        enum_values("store.backend").unwrap(),
        ["sqlite", "memory", "postgres"]
    );
    // A channel's, read from its section's type: none is named in `enum_values`.
    assert_eq!(
        enum_values("telegram.transport").unwrap(),
        ["polling", "webhook"]
    );
    assert_eq!(
        enum_values("matrix.locale").unwrap(),
        variants::<crate::present::render::Locale>()
    );
    assert_eq!(
        enum_values("feishu.domain").unwrap(),
        variants::<crate::channels::feishu::settings::Domain>()
    );
    assert_eq!(enum_values("telegram.chats"), None);
    assert_eq!(enum_values("telegram.nothing.here"), None);
    assert_eq!(enum_values("nowhere.locale"), None);
    // Every text setting that refuses a name it does not know is one of a fixed set:
    // its message lists the values it takes.
    let defaults: toml::Table = toml::from_str(DEFAULT_TOML).unwrap();
    let mut text_keys = Vec::new();
    fn walk(t: &toml::Table, prefix: &str, out: &mut Vec<String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                toml::Value::Table(t) => walk(t, &key, out),
                toml::Value::String(_) => out.push(key),
                _ => {}
            }
        }
    }
    walk(&defaults, "", &mut text_keys);
    for key in text_keys {
        let var = format!("IMRELAY__{}", key.replace('.', "__").to_uppercase());
        let Err(e) = Settings::load_with_env(None, env(&[(&var, "zz-not-a-value")])) else {
            continue;
        };
        let e = e.to_string();
        assert!(!e.contains("variant"), "{key}: {e}");
        if let Some(values) = enum_values(&key) {
            assert!(!values.is_empty(), "{key}");
            assert!(e.contains("is not one of the values"), "{key}: {e}");
            let default = defaults_value(&defaults, &key);
            assert!(values.contains(&default), "{key}: {default} in {values:?}");
        }
    }
}

fn defaults_value(t: &toml::Table, key: &str) -> String {
    let mut v = None;
    let mut table = Some(t);
    for part in key.split('.') {
        v = table.and_then(|t| t.get(part));
        table = v.and_then(toml::Value::as_table);
    }
    v.and_then(toml::Value::as_str)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn single_underscore_variables_are_named_in_a_warning() {
    let loaded = Settings::load_from(
        None,
        HashMap::from([
            ("IMRELAY_SERVER_LISTEN".to_string(), "0.0.0.0:1".to_string()),
            ("IMRELAY_CONFIG".to_string(), "x.toml".to_string()),
            ("IMRELAY_TOKEN".to_string(), "not a setting".to_string()),
        ]),
    )
    .unwrap();
    assert_eq!(loaded.settings.server.listen.port(), 8787, "ignored");
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("IMRELAY_SERVER_LISTEN is ignored"));
    assert!(loaded.warnings[0].contains("IMRELAY__SERVER__LISTEN"));
}

#[test]
fn a_channel_without_approvers_is_warned_about() {
    let mut s = Settings::defaults().unwrap();
    assert!(s.warnings().is_empty());
    s.telegram.enabled = true;
    s.feishu.enabled = true;
    // With a chat to post to (an empty list has a warning of its own).
    s.feishu.receivers = vec!["chat_id:oc_1".parse().unwrap()];
    let w = s.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w[0].contains("telegram.approvers is empty"), "{w:?}");
    assert!(w[1].contains("feishu.approvers is empty"), "{w:?}");
    s.telegram.approvers = vec![1];
    s.feishu.approvers = vec!["ou_1".into()];
    assert!(s.warnings().is_empty());
}
