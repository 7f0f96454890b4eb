//! Settings primitives every part of the configuration shares: secrets that are never printed
//! and lists that can be written as a list (files) or as one comma-separated string (the
//! environment), and the paths on this server that settings claim. A leaf: it imports nothing from the crate, so `config.rs` and each channel's
//! own settings type can both use it without importing each other.

use std::fmt;

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

/// A short fingerprint of a token, to tell in logs which token a request came with without
/// showing it: the first 8 hex digits of its SHA-256 (`printf %s "$TOKEN" | sha256sum | cut
/// -c1-8` gives the same).
pub fn fingerprint(token: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(token.as_bytes());
    digest.iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// Deserializes a list given as a list or as one value (`agent = "codex"` for
/// `agent = ["codex"]`), without splitting text at commas: for the lists inside `[[routes]]`
/// and `[[policy]]`, which only a file sets and whose patterns may hold commas.
pub fn one_or_many<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    use serde::de::IntoDeserializer;
    struct Visit<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list, or one value")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element()? {
                out.push(item);
            }
            Ok(out)
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Vec<T>, E> {
            T::deserialize(v.into_deserializer()).map(|one| vec![one])
        }
        fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Vec<T>, E> {
            T::deserialize(v.into_deserializer()).map(|one| vec![one])
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Vec<T>, E> {
            T::deserialize(v.into_deserializer()).map(|one| vec![one])
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Vec<T>, E> {
            T::deserialize(v.into_deserializer()).map(|one| vec![one])
        }
    }
    d.deserialize_any(Visit(std::marker::PhantomData))
}

/// Deserializes a list given either as a list (files), as one comma-separated string (the
/// environment, where `config` cannot tell a one-item list from a plain value), or as one
/// value that is not text. Spaces around
/// items are dropped; an empty string is an empty list, but an empty item (`a,,b`, or a value
/// of spaces alone) is refused rather than silently dropped.
pub fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + std::str::FromStr,
    T::Err: fmt::Display,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        Many(Vec<T>),
        Joined(String),
        // One value that is not text: `chats = -1001234567890` for `[-1001234567890]`.
        One(T),
    }
    match OneOrMany::<T>::deserialize(d)? {
        OneOrMany::Many(v) => Ok(v),
        OneOrMany::One(v) => Ok(vec![v]),
        OneOrMany::Joined(s) if s.is_empty() => Ok(Vec::new()),
        OneOrMany::Joined(s) => s
            .split(',')
            .map(str::trim)
            .enumerate()
            .map(|(i, p)| {
                if p.is_empty() {
                    return Err(serde::de::Error::custom(format!(
                        "item {} of this comma-separated list is empty",
                        i + 1
                    )));
                }
                p.parse::<T>().map_err(serde::de::Error::custom)
            })
            .collect(),
    }
}

/// A secret configuration value: readable only through [`Secret::expose`].
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(SecretString);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::new(s))
    }
}

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(SecretString::from(value.into()))
    }

    /// The secret value. Never log it.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }

    /// Whether the secret is empty (i.e. not configured).
    pub fn is_empty(&self) -> bool {
        self.expose().is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.is_empty() { "" } else { "[redacted]" })
    }
}

/// A path on this server that an enabled part of the configuration serves (a channel's
/// callback endpoint), with the setting that names it, so that two parts claiming one path are
/// refused whichever they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathClaim {
    /// The setting that names the path (e.g. `telegram.inbound_path`).
    pub setting: &'static str,
    /// The path.
    pub path: String,
}

impl PathClaim {
    /// `setting` claims `path`.
    pub fn new(setting: &'static str, path: impl Into<String>) -> Self {
        Self {
            setting,
            path: path.into(),
        }
    }
}

/// Refuses the first path claimed twice, naming both settings.
pub(crate) fn check_path_claims(claims: &[PathClaim]) -> Result<(), String> {
    for (i, a) in claims.iter().enumerate() {
        if let Some(b) = claims[i + 1..].iter().find(|b| b.path == a.path) {
            return Err(format!(
                "{} and {} are both {:?}: give each channel its own path",
                a.setting, b.setting, a.path
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_claimed_twice_is_refused_with_both_settings_named() {
        let a = PathClaim::new("a.path", "/x");
        let b = PathClaim::new("b.path", "/y");
        assert_eq!(check_path_claims(&[a.clone(), b.clone()]), Ok(()));
        let c = PathClaim::new("c.path", "/x");
        let err = check_path_claims(&[a, b, c]).unwrap_err();
        assert_eq!(
            err,
            "a.path and c.path are both \"/x\": give each channel its own path"
        );
    }
}
