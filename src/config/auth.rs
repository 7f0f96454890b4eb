//! `[auth]`: the agent and operator tokens. An operator token may carry a label that says
//! whose it is (`alice-laptop`); a person lists the labels of their tokens
//! (`[[people]] operator = ["alice-laptop"]`), and answers given with the token are then
//! theirs, and limited to the routes they approve. A token without a label is the
//! administrator's: it may answer everything, as every operator token could before labels.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{ConfigError, MAKE_A_TOKEN, MIN_TOKEN_CHARS, PLACEHOLDER_PREFIX};
use crate::settings::{Secret, list};

/// Reads `auth.operator_tokens`: a list of tokens (each a string or a table), one table, or
/// (the environment) one comma-separated string. Unlike [`list`], a wrong entry is refused
/// with what is wrong with it.
fn operator_tokens<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<OperatorToken>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Vec<OperatorToken>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of operator tokens")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(t) = seq.next_element::<OperatorToken>()? {
                out.push(t);
            }
            Ok(out)
        }

        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
            if s.trim().is_empty() {
                return Ok(Vec::new());
            }
            s.split(',')
                .enumerate()
                .map(|(i, item)| {
                    if item.trim().is_empty() {
                        return Err(E::custom(format!(
                            "item {} of this comma-separated list is empty",
                            i + 1
                        )));
                    }
                    Ok(item
                        .parse()
                        .unwrap_or_else(|e: std::convert::Infallible| match e {}))
                })
                .collect()
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            OperatorToken::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                .map(|t| vec![t])
        }
    }
    d.deserialize_any(Visitor)
}

/// The longest label an operator token may have.
pub const MAX_LABEL_CHARS: usize = 64;

/// `[auth]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// Tokens with the agent scope.
    #[serde(deserialize_with = "list")]
    pub agent_tokens: Vec<Secret>,
    /// Tokens with the operator scope, each with the label of whose it is (or none: the
    /// administrator's).
    #[serde(deserialize_with = "operator_tokens")]
    pub operator_tokens: Vec<OperatorToken>,
}

/// One operator token: `"<token>"` or `{ token = "<token>", label = "alice-laptop" }` in a
/// list; in the comma-separated string of the environment
/// (`IMRELAY__AUTH__OPERATOR_TOKENS`), each item is `<token>` or `alice-laptop <token>`:
/// the label, a space, the token (a token never holds a space, so a label is never taken
/// for one).
#[derive(Clone)]
pub struct OperatorToken {
    /// The token.
    pub token: Secret,
    /// Whose it is, as `[[people]]` name it in `operator = [...]`; `None`: the
    /// administrator's token.
    pub label: Option<String>,
}

impl OperatorToken {
    /// A token without a label (the administrator's).
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: Secret::new(token),
            label: None,
        }
    }

    /// A token with `label`.
    pub fn labelled(token: impl Into<String>, label: impl Into<String>) -> Self {
        Self {
            token: Secret::new(token),
            label: Some(label.into()),
        }
    }

    /// The token. Never log it.
    pub fn expose(&self) -> &str {
        self.token.expose()
    }

    /// Whether the token is empty.
    pub fn is_empty(&self) -> bool {
        self.token.is_empty()
    }
}

impl fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorToken")
            .field("token", &self.token)
            .field("label", &self.label)
            .finish()
    }
}

impl std::str::FromStr for OperatorToken {
    type Err = std::convert::Infallible;

    /// `<token>` or `<label> <token>`; what is wrong with either is said by
    /// [`AuthSettings::validate`], which knows the entry's place.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(match s.split_once(char::is_whitespace) {
            Some((label, token)) => Self::labelled(token.trim_start(), label),
            None => Self::new(s),
        })
    }
}

impl<'de> Deserialize<'de> for OperatorToken {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OperatorToken;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a token (\"<token>\"), a token with its label ({ token = \"<token>\", \
                     label = \"alice-laptop\" }), or \"<label> <token>\"",
                )
            }

            // In a list, a string is the token whole: a space in it is refused as one.
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<OperatorToken, E> {
                Ok(OperatorToken::new(s))
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<OperatorToken, A::Error> {
                let (mut token, mut label) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "token" => token = Some(map.next_value::<String>()?),
                        "label" => label = Some(map.next_value::<String>()?),
                        other => {
                            return Err(serde::de::Error::custom(format!(
                                "an operator token takes `token` and `label`, not `{}`",
                                other.escape_debug()
                            )));
                        }
                    }
                }
                let Some(token) = token else {
                    return Err(serde::de::Error::custom(
                        "this operator token has no `token`: write { token = \"<token>\", label = \"alice-laptop\" }",
                    ));
                };
                Ok(OperatorToken {
                    token: Secret::new(token),
                    label,
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Serialize for OperatorToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match &self.label {
            None => self.token.serialize(s),
            Some(label) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("token", &self.token)?;
                m.serialize_entry("label", label)?;
                m.end()
            }
        }
    }
}

/// Fewest different characters a token may have: a long run of one character (or two) is
/// as guessable as a short token.
const MIN_DISTINCT_CHARS: usize = 8;

/// How many different characters `token` has.
fn distinct(token: &str) -> usize {
    let mut seen: Vec<char> = token.chars().collect();
    seen.sort_unstable();
    seen.dedup();
    seen.len()
}

/// A token written with the scheme of the header that carries it.
const BEARER: &str = "starts with `Bearer `, which is how the Authorization header carries a \
     token, not part of it: drop `Bearer ` and keep the rest";

/// What is wrong with `token`, if anything.
fn token_problem(token: &str) -> Option<String> {
    Some(if token.starts_with(PLACEHOLDER_PREFIX) {
        format!("still holds the example placeholder (\"{PLACEHOLDER_PREFIX}...\")")
    } else if token.is_empty() {
        "is empty".to_string()
    } else if token
        .get(..7)
        .is_some_and(|b| b.eq_ignore_ascii_case("bearer "))
    {
        BEARER.to_string()
    } else if token.chars().any(char::is_whitespace) {
        "contains whitespace".to_string()
    } else if !token.chars().all(|c| c.is_ascii_graphic()) {
        "contains a character that is not printable ASCII, which no client can send in an \
         Authorization header"
            .to_string()
    } else if token.chars().count() < MIN_TOKEN_CHARS {
        format!("is shorter than {MIN_TOKEN_CHARS} characters")
    } else if distinct(token) < MIN_DISTINCT_CHARS {
        format!("has fewer than {MIN_DISTINCT_CHARS} different characters, so it can be guessed")
    } else {
        return None;
    })
}

/// What is wrong with `label`, if anything.
fn label_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        Some("is empty: give a name such as \"alice-laptop\", or leave the label out".into())
    } else if label.chars().count() > MAX_LABEL_CHARS {
        Some(format!("is longer than {MAX_LABEL_CHARS} characters"))
    } else if !label
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
    {
        Some(format!(
            "{:?} may hold only letters, digits, '-', '_', '.' and '@' (like \"alice-laptop\")",
            label.escape_debug().to_string()
        ))
    } else {
        None
    }
}

impl AuthSettings {
    /// Refuses tokens that are guessable, cannot be sent in an `Authorization` header, are
    /// still the deployment examples' placeholders, or are valid in both scopes (an agent
    /// holding such a token could approve its own requests), and labels that are malformed
    /// or given twice. Messages name the token by its scope and position, never by its
    /// value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let agent = self.agent_tokens.iter().map(Secret::expose);
        let operator = self.operator_tokens.iter().map(OperatorToken::expose);
        let scopes: [(&str, Vec<&str>); 2] = [
            ("auth.agent_tokens", agent.collect()),
            ("auth.operator_tokens", operator.collect()),
        ];
        for (scope, tokens) in &scopes {
            for (i, token) in tokens.iter().enumerate() {
                if let Some(problem) = token_problem(token) {
                    let fix = if problem == BEARER {
                        String::new()
                    } else {
                        format!(": set a real token, {MAKE_A_TOKEN}")
                    };
                    return Err(ConfigError::Invalid(format!("{scope}[{i}] {problem}{fix}")));
                }
                // Listed twice, a token would be whichever entry came last (an administrator's
                // token where a label was meant, or the other way round).
                if let Some(j) = tokens[..i].iter().position(|t| t == token) {
                    return Err(ConfigError::Invalid(format!(
                        "{scope}[{i}] is the same token as {scope}[{j}]: a token is listed                          once, with its label if it has one. Remove one of them (or give                          each its own token: {MAKE_A_TOKEN})"
                    )));
                }
            }
        }
        for (i, agent) in self.agent_tokens.iter().enumerate() {
            if let Some(j) = scopes[1].1.iter().position(|o| *o == agent.expose()) {
                return Err(ConfigError::Invalid(format!(
                    "auth.agent_tokens[{i}] is also auth.operator_tokens[{j}]: an agent holding \
                     it could approve its own requests. Give each scope its own tokens: \
                     {MAKE_A_TOKEN} for each"
                )));
            }
        }
        self.validate_labels()
    }

    fn validate_labels(&self) -> Result<(), ConfigError> {
        for (i, t) in self.operator_tokens.iter().enumerate() {
            let Some(label) = &t.label else { continue };
            if let Some(problem) = label_problem(label) {
                return Err(ConfigError::Invalid(format!(
                    "auth.operator_tokens[{i}].label {problem}"
                )));
            }
            if let Some(j) = self.operator_tokens[..i]
                .iter()
                .position(|o| o.label.as_deref() == Some(label))
            {
                return Err(ConfigError::Invalid(format!(
                    "auth.operator_tokens[{i}].label {label:?} is also the label of \
                     auth.operator_tokens[{j}]: a label names one token, so that an answer \
                     names the person who gave it. Give each token its own label"
                )));
            }
        }
        Ok(())
    }

    /// The labels of the operator tokens.
    pub fn operator_labels(&self) -> impl Iterator<Item = &str> {
        self.operator_tokens
            .iter()
            .filter_map(|t| t.label.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Auth {
        auth: AuthSettings,
    }

    fn read(toml: &str) -> Result<AuthSettings, String> {
        toml::from_str::<Auth>(&format!("[auth]\nagent_tokens = []\n{toml}"))
            .map(|a| a.auth)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn an_operator_token_is_a_string_a_table_or_a_label_and_a_token() {
        // The environment's form: one string, a label before a token.
        let env = read(
            "operator_tokens = \"plain-token-0123456789, alice-laptop alice-token-0123456789\"",
        )
        .unwrap();
        let file = read(
            "operator_tokens = [\"plain-token-0123456789\", \
             { token = \"alice-token-0123456789\", label = \"alice-laptop\" }]",
        )
        .unwrap();
        let pairs = |a: &AuthSettings| -> Vec<(String, Option<String>)> {
            a.operator_tokens
                .iter()
                .map(|t| (t.expose().to_string(), t.label.clone()))
                .collect()
        };
        assert_eq!(pairs(&env), pairs(&file));
        let a = read(
            "operator_tokens = [\"plain-token-0123456789\", \
             { token = \"alice-token-0123456789\", label = \"alice-laptop\" }, \
             { token = \"bob-token-0123456789\", label = \"bob-phone\" }]",
        )
        .unwrap();
        let got: Vec<(&str, Option<&str>)> = a
            .operator_tokens
            .iter()
            .map(|t| (t.expose(), t.label.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("plain-token-0123456789", None),
                ("alice-token-0123456789", Some("alice-laptop")),
                ("bob-token-0123456789", Some("bob-phone")),
            ]
        );
        a.validate().unwrap();
        assert_eq!(
            a.operator_labels().collect::<Vec<_>>(),
            ["alice-laptop", "bob-phone"]
        );
        // The token never shows; the label does.
        let shown = format!("{a:?} {}", serde_json::to_string(&a).unwrap());
        assert!(!shown.contains("token-0123456789"), "{shown}");
        assert!(shown.contains("alice-laptop"), "{shown}");
    }

    #[test]
    fn the_environment_labels_tokens_too() {
        let env = [(
            "IMRELAY__AUTH__OPERATOR_TOKENS".to_string(),
            "alice-laptop alice-token-0123456789, admin-token-0123456789".to_string(),
        )];
        let s =
            crate::config::Settings::load_with_env(None, Some(env.into_iter().collect())).unwrap();
        let t = &s.auth.operator_tokens;
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].expose(), t[0].label.as_deref()),
            ("alice-token-0123456789", Some("alice-laptop"))
        );
        assert_eq!(
            (t[1].expose(), t[1].label.as_deref()),
            ("admin-token-0123456789", None)
        );
    }

    fn none() -> AuthSettings {
        AuthSettings {
            agent_tokens: Vec::new(),
            operator_tokens: Vec::new(),
        }
    }

    #[test]
    fn a_token_listed_twice_or_easily_guessed_is_refused() {
        let a = AuthSettings {
            operator_tokens: vec![
                OperatorToken::labelled("op-token-0123456789", "alice-laptop"),
                OperatorToken::new("op-token-0123456789"),
            ],
            ..none()
        };
        let e = a.validate().unwrap_err().to_string();
        assert!(
            e.contains("auth.operator_tokens[1] is the same token as auth.operator_tokens[0]"),
            "{e}"
        );
        assert!(
            !e.contains("op-token-0123456789"),
            "never the token itself: {e}"
        );
        let a = AuthSettings {
            agent_tokens: vec![
                Secret::new("agent-token-0123456789"),
                Secret::new("agent-token-0123456789"),
            ],
            ..none()
        };
        assert!(
            a.validate()
                .unwrap_err()
                .to_string()
                .contains("auth.agent_tokens[1] is the same token")
        );
        for weak in [
            "aaaaaaaaaaaaaaaa",
            "abababababababababab",
            "abcabcabcabcabcabc",
        ] {
            let a = AuthSettings {
                agent_tokens: vec![Secret::new(weak)],
                ..none()
            };
            let e = a.validate().unwrap_err().to_string();
            assert!(
                e.contains("fewer than 8 different characters"),
                "{weak}: {e}"
            );
        }
    }

    #[test]
    fn bad_tables_and_labels_are_refused_in_words() {
        let e = read("operator_tokens = [{ label = \"x\" }]").unwrap_err();
        assert!(e.contains("has no `token`"), "{e}");
        let e = read("operator_tokens = [{ token = \"t-0123456789abcdef\", name = \"x\" }]")
            .unwrap_err();
        assert!(e.contains("takes `token` and `label`, not `name`"), "{e}");
        let invalid = |toml: &str| read(toml).unwrap().validate().unwrap_err().to_string();
        let e =
            invalid("operator_tokens = [{ token = \"t-0123456789abcdef\", label = \"al ice\" }]");
        assert!(e.contains("auth.operator_tokens[0].label"), "{e}");
        let e = invalid("operator_tokens = [{ token = \"t-0123456789abcdef\", label = \"\" }]");
        assert!(e.contains("is empty"), "{e}");
        let e = invalid("operator_tokens = \"a t-0123456789abcdef, a u-0123456789abcdef\"");
        assert!(
            e.contains(
                "auth.operator_tokens[1].label \"a\" is also the label of auth.operator_tokens[0]"
            ),
            "{e}"
        );
        // A label before a short token: the token is what is wrong, named by its place.
        let e = invalid("operator_tokens = \"alice short\"");
        assert!(
            e.contains("auth.operator_tokens[0] is shorter than") && !e.contains("short\""),
            "{e}"
        );
    }
}
