//! An agent's permission suggestions, checked against the Claude Agent SDK's
//! `PermissionUpdate` type: "always allow" hands them back to the SDK as
//! `updatedPermissions`, which it accepts only in that shape.
//!
//! The shape: an array of objects tagged by `type`:
//!
//! | `type` | fields |
//! |---|---|
//! | `addRules`, `replaceRules`, `removeRules` | `rules` (`[{"toolName", "ruleContent"?}]`), `behavior` (`allow`, `deny`, `ask`), `destination` |
//! | `setMode` | `mode` (a permission mode such as `acceptEdits`), `destination` |
//! | `addDirectories`, `removeDirectories` | `directories` (`["path", ...]`), `destination` |
//!
//! `destination` is one of `userSettings`, `projectSettings`, `localSettings`, `session`,
//! `cliArg`. An empty array means no suggestions.

use serde_json::{Map, Value};

use super::ValidationError;
use super::question::json_type;

/// Where an update applies.
pub const DESTINATIONS: &[&str] = &[
    "userSettings",
    "projectSettings",
    "localSettings",
    "session",
    "cliArg",
];

/// The destination of an agent's "always" that cannot be limited to one session: it lasts
/// as long as the agent's process runs, for all its sessions (OpenCode's "always"). Channels
/// say so; and a grant ("allow similar", limited to what its rule says) never applies such a
/// suggestion on the side ([`outlives_the_session`]).
pub const PROCESS_LIFETIME: &str = "cliArg";

/// Whether any of `suggestions` lasts beyond the session ([`PROCESS_LIFETIME`]).
pub fn outlives_the_session(suggestions: &Value) -> bool {
    let lasting = |u: &Value| u["destination"] == PROCESS_LIFETIME;
    match suggestions {
        Value::Array(updates) => updates.iter().any(lasting),
        single => lasting(single),
    }
}

/// What a rule does.
const BEHAVIORS: &[&str] = &["allow", "deny", "ask"];

/// Longest permission mode name accepted.
const MAX_MODE_CHARS: usize = 64;

/// The fields each update type has besides `type` and `destination`.
fn fields_of(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "addRules" | "replaceRules" | "removeRules" => Some(&["rules", "behavior"]),
        "setMode" => Some(&["mode"]),
        "addDirectories" | "removeDirectories" => Some(&["directories"]),
        _ => None,
    }
}

/// Checks an agent's permission suggestions; `None` when there are none (`[]`).
///
/// Errors name the offending field: `suggestions[1].type: ...`.
pub fn validate_suggestions(suggestions: Value) -> Result<Option<Value>, ValidationError> {
    let Value::Array(updates) = &suggestions else {
        return Err(ValidationError::new(
            "suggestions",
            format!(
                "expected an array of permission updates, got {}",
                json_type(&suggestions)
            ),
        ));
    };
    for (i, update) in updates.iter().enumerate() {
        check_update(update, &format!("suggestions[{i}]"))?;
    }
    Ok((!updates.is_empty()).then_some(suggestions))
}

/// The valid updates among `suggestions`, for a caller that must not fail on them (a hook
/// that has to answer whatever its input holds): the array of the updates that fit (`None` if
/// none does) and why each of the others was left out.
pub fn valid_suggestions(suggestions: Value) -> (Option<Value>, Vec<ValidationError>) {
    let Value::Array(updates) = suggestions else {
        let e = validate_suggestions(suggestions).err();
        return (None, e.into_iter().collect());
    };
    let mut errors = Vec::new();
    let kept: Vec<Value> = updates
        .into_iter()
        .enumerate()
        .filter_map(
            |(i, update)| match check_update(&update, &format!("suggestions[{i}]")) {
                Ok(()) => Some(update),
                Err(e) => {
                    errors.push(e);
                    None
                }
            },
        )
        .collect();
    ((!kept.is_empty()).then_some(Value::Array(kept)), errors)
}

fn check_update(update: &Value, at: &str) -> Result<(), ValidationError> {
    let field = |f: &str| format!("{at}.{f}");
    let Value::Object(update) = update else {
        return Err(ValidationError::new(
            at,
            format!(
                "expected a permission update object, got {}",
                json_type(update)
            ),
        ));
    };
    let kind = one_of(
        update.get("type"),
        &field("type"),
        &[
            "addRules",
            "replaceRules",
            "removeRules",
            "setMode",
            "addDirectories",
            "removeDirectories",
        ],
    )?;
    let own = fields_of(kind).unwrap_or_default();
    if let Some(extra) = update
        .keys()
        .find(|k| !matches!(k.as_str(), "type" | "destination") && !own.contains(&k.as_str()))
    {
        return Err(ValidationError::new(
            field(extra),
            format!("is not a field of a `{kind}` update"),
        ));
    }
    one_of(
        update.get("destination"),
        &field("destination"),
        DESTINATIONS,
    )?;
    match kind {
        "setMode" => {
            let mode = string(update.get("mode"), &field("mode"))?;
            if mode.chars().count() > MAX_MODE_CHARS
                || !mode.chars().all(|c| c.is_ascii_alphabetic())
            {
                return Err(ValidationError::new(
                    field("mode"),
                    format!("{mode:?} is not a permission mode name (such as \"acceptEdits\")"),
                ));
            }
        }
        "addDirectories" | "removeDirectories" => {
            for (j, dir) in array(update.get("directories"), &field("directories"))?
                .iter()
                .enumerate()
            {
                string(Some(dir), &format!("{at}.directories[{j}]"))?;
            }
        }
        _ => {
            one_of(update.get("behavior"), &field("behavior"), BEHAVIORS)?;
            for (j, rule) in array(update.get("rules"), &field("rules"))?
                .iter()
                .enumerate()
            {
                check_rule(rule, &format!("{at}.rules[{j}]"))?;
            }
        }
    }
    Ok(())
}

fn check_rule(rule: &Value, at: &str) -> Result<(), ValidationError> {
    let Value::Object(rule) = rule else {
        return Err(ValidationError::new(
            at,
            format!(
                "expected a rule object ({{\"toolName\", \"ruleContent\"?}}), got {}",
                json_type(rule)
            ),
        ));
    };
    string(rule.get("toolName"), &format!("{at}.toolName"))?;
    match rule.get("ruleContent") {
        None | Some(Value::String(_)) => {}
        Some(other) => {
            return Err(ValidationError::new(
                format!("{at}.ruleContent"),
                format!("expected a string, got {}", json_type(other)),
            ));
        }
    }
    if let Some(extra) = unknown_key(rule, &["toolName", "ruleContent"]) {
        return Err(ValidationError::new(
            format!("{at}.{extra}"),
            "is not a field of a rule (toolName, ruleContent)",
        ));
    }
    Ok(())
}

fn unknown_key<'a>(m: &'a Map<String, Value>, known: &[&str]) -> Option<&'a str> {
    m.keys().map(String::as_str).find(|k| !known.contains(k))
}

fn string<'a>(v: Option<&'a Value>, field: &str) -> Result<&'a str, ValidationError> {
    match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(Value::String(_)) => Err(ValidationError::new(field, "must not be empty")),
        Some(other) => Err(ValidationError::new(
            field,
            format!("expected a string, got {}", json_type(other)),
        )),
        None => Err(ValidationError::new(field, "is required")),
    }
}

fn array<'a>(v: Option<&'a Value>, field: &str) -> Result<&'a [Value], ValidationError> {
    match v {
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(ValidationError::new(
            field,
            format!("expected an array, got {}", json_type(other)),
        )),
        None => Err(ValidationError::new(field, "is required")),
    }
}

fn one_of<'a>(
    v: Option<&'a Value>,
    field: &str,
    allowed: &[&str],
) -> Result<&'a str, ValidationError> {
    let s = string(v, field)?;
    if allowed.contains(&s) {
        Ok(s)
    } else {
        Err(ValidationError::new(
            field,
            format!("{s:?} is not one of {}", allowed.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn only_a_process_lifetime_destination_outlives_the_session() {
        let lasting = serde_json::json!([{"type": "addRules", "rules": [{"toolName": "bash", "ruleContent": "echo *"}], "behavior": "allow", "destination": "cliArg"}]);
        assert!(outlives_the_session(&lasting));
        for d in [
            "session",
            "localSettings",
            "userSettings",
            "projectSettings",
        ] {
            let s =
                serde_json::json!([{"type": "setMode", "mode": "acceptEdits", "destination": d}]);
            assert!(!outlives_the_session(&s), "{d}");
        }
    }

    use super::*;
    use serde_json::json;

    fn every_type() -> Value {
        json!([
            {"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
             "behavior": "allow", "destination": "localSettings"},
            {"type": "replaceRules", "rules": [{"toolName": "Read"}], "behavior": "ask",
             "destination": "session"},
            {"type": "removeRules", "rules": [], "behavior": "deny", "destination": "userSettings"},
            {"type": "setMode", "mode": "acceptEdits", "destination": "cliArg"},
            {"type": "addDirectories", "directories": ["/tmp/x"], "destination": "projectSettings"},
            {"type": "removeDirectories", "directories": [], "destination": "session"}
        ])
    }

    #[test]
    fn every_sdk_update_type_is_accepted_as_given() {
        assert_eq!(validate_suggestions(every_type()), Ok(Some(every_type())));
        assert_eq!(validate_suggestions(json!([])), Ok(None));
    }

    #[test]
    fn what_is_not_an_update_is_refused_naming_the_field() {
        let valid = every_type()[0].clone();
        let cases = [
            (json!("x"), "suggestions"),
            (json!(5), "suggestions"),
            (json!(false), "suggestions"),
            (json!({}), "suggestions"),
            (json!(null), "suggestions"),
            (json!([valid, "x"]), "suggestions[1]"),
            (json!([{}]), "suggestions[0].type"),
            (
                json!([valid, {"type": "grantAll", "destination": "session"}]),
                "suggestions[1].type",
            ),
            (
                json!([{"type": "setMode", "mode": "plan"}]),
                "suggestions[0].destination",
            ),
            (
                json!([{"type": "setMode", "mode": "plan", "destination": "disk"}]),
                "suggestions[0].destination",
            ),
            (
                json!([{"type": "setMode", "destination": "session"}]),
                "suggestions[0].mode",
            ),
            (
                json!([{"type": "setMode", "mode": "a b", "destination": "session"}]),
                "suggestions[0].mode",
            ),
            (
                json!([{"type": "setMode", "mode": "plan", "destination": "session", "rules": []}]),
                "suggestions[0].rules",
            ),
            (
                json!([{"type": "addRules", "rules": [], "destination": "session"}]),
                "suggestions[0].behavior",
            ),
            (
                json!([{"type": "addRules", "rules": [], "behavior": "yes", "destination": "session"}]),
                "suggestions[0].behavior",
            ),
            (
                json!([{"type": "addRules", "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules",
            ),
            (
                json!([{"type": "addRules", "rules": {}, "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules",
            ),
            (
                json!([{"type": "addRules", "rules": ["Bash"], "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules[0]",
            ),
            (
                json!([{"type": "addRules", "rules": [{"ruleContent": "x"}], "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules[0].toolName",
            ),
            (
                json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": 1}], "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules[0].ruleContent",
            ),
            (
                json!([{"type": "addRules", "rules": [{"toolName": "Bash", "x": 1}], "behavior": "allow", "destination": "session"}]),
                "suggestions[0].rules[0].x",
            ),
            (
                json!([{"type": "addDirectories", "directories": [1], "destination": "session"}]),
                "suggestions[0].directories[0]",
            ),
            (
                json!([{"type": "addDirectories", "directories": "/tmp", "destination": "session"}]),
                "suggestions[0].directories",
            ),
        ];
        for (suggestions, field) in cases {
            let err = validate_suggestions(suggestions.clone())
                .expect_err(&format!("accepted {suggestions}"));
            assert_eq!(err.field, field, "{suggestions}: {err}");
        }
    }

    #[test]
    fn a_lenient_caller_keeps_the_updates_that_fit() {
        let valid = every_type()[3].clone();
        let (kept, errors) = valid_suggestions(json!([{"type": "x"}, valid, 7]));
        assert_eq!(kept, Some(json!([valid])));
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["suggestions[0].type", "suggestions[2]"]);
        let (kept, errors) = valid_suggestions(json!("x"));
        assert_eq!((kept, errors.len()), (None, 1));
        assert_eq!(valid_suggestions(json!([])), (None, vec![]));
    }
}
