//! The id of an interaction: the agent's idempotency key or one imrelay assigns, safe in a URL.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Text;
use crate::interaction::ValidationError;

/// Longest accepted interaction id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Identifies one interaction: the agent's idempotency key (normally the SDK's `toolUseID`)
/// or a UUID v7 assigned by imrelay.
///
/// Ids appear in URLs, so they are restricted to `[A-Za-z0-9._:-]`, 1 to 128 bytes, and may
/// not be `.` or `..` (URL normalization removes those path segments: no browser could
/// answer such an interaction).
///
/// One pointer wide (a shared [`Text`]): an id is held by its interaction and as the key of
/// the maps and queues that find it, once per pending interaction each.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct InteractionId(Text);

impl InteractionId {
    /// Validates an id supplied from outside.
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        if raw == "." || raw == ".." {
            return Err(ValidationError::new(
                "id",
                "may not be `.` or `..`: URLs cannot carry those as a path segment",
            ));
        }
        Self::stored(raw)
    }

    /// Validates an id read back from the store: as [`InteractionId::parse`], but a dot
    /// segment that an earlier version accepted is still read.
    pub fn stored(raw: &str) -> Result<Self, ValidationError> {
        if raw.is_empty() || raw.len() > MAX_ID_LEN {
            return Err(ValidationError::new(
                "id",
                format!("must be 1 to {MAX_ID_LEN} characters long"),
            ));
        }
        if let Some(bad) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(ValidationError::new(
                "id",
                format!("may only contain letters, digits and . _ : - (found {bad:?})"),
            ));
        }
        Ok(Self(Text::from(raw)))
    }

    /// A fresh, time-ordered id (UUID v7).
    pub fn generate() -> Self {
        Self(Text::from(uuid::Uuid::now_v7().to_string()))
    }

    /// The empty id, which sorts before every valid one: the lower end of a range of keys
    /// that end with an id. Never the id of an interaction.
    pub fn lowest() -> Self {
        Self(Text::new())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's string, shared rather than copied (for a record kept beside the
    /// interaction).
    pub fn shared(&self) -> Text {
        self.0.clone()
    }
}

/// Ids hash and compare as their strings: a map keyed by id is searched with a `&str`.
impl std::borrow::Borrow<str> for InteractionId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for InteractionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::stored(&raw).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for InteractionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for InteractionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl AsRef<str> for InteractionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}
