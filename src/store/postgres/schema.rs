//! The schema a store's tables live in: its name checked, and the names derived from it (the
//! SQL identifier, the advisory lock keys, the notification channels).

use sha2::{Digest, Sha256};

use crate::store::StoreError;

/// The longest schema name: the notification channels (`<schema>.changes`,
/// `<schema>.settled`) must fit PostgreSQL's 63-byte identifiers.
const MAX_SCHEMA_LEN: usize = 55;

/// Checks a schema name: lowercase letters, digits and `_`, starting with a letter or `_`,
/// at most 55 bytes, not `pg_…` (reserved by PostgreSQL).
pub(crate) fn check_schema_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SCHEMA_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a usable schema name: use 1 to {MAX_SCHEMA_LEN} lowercase letters, \
             digits and _, starting with a letter (and not pg_)"
        ))
    }
}

/// The schema a store uses, and the names derived from it.
#[derive(Clone, Debug)]
pub(crate) struct Schema {
    name: String,
    quoted: String,
}

impl Schema {
    /// The schema `name`, refused as unavailable if it is not a usable name
    /// ([`check_schema_name`]).
    pub(super) fn new(name: &str) -> Result<Self, StoreError> {
        check_schema_name(name).map_err(StoreError::Unavailable)?;
        Ok(Self {
            name: name.to_string(),
            quoted: format!("\"{name}\""),
        })
    }

    /// The schema's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The name as an SQL identifier.
    pub(crate) fn quoted(&self) -> &str {
        &self.quoted
    }

    /// `sql` with `{s}` replaced by the schema (statements name their tables `{s}.table`).
    pub(crate) fn sql(&self, sql: &str) -> String {
        sql.replace("{s}", &self.quoted)
    }

    /// The key of an advisory lock for `purpose` in this schema (every process derives the
    /// same one).
    pub(crate) fn lock_key(&self, purpose: &str) -> i64 {
        let digest = Sha256::digest(format!("imrelay:{}:{purpose}", self.name).as_bytes());
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        i64::from_be_bytes(bytes)
    }

    /// The notification channel creates and resolutions are announced on.
    pub(crate) fn channel(&self) -> String {
        format!("{}.changes", self.name)
    }

    /// The notification channel resolutions are also announced on, with the resolution
    /// itself when it fits a notification (see [`super::listener`]). A channel of its own, so a
    /// replica that knows only [`Schema::channel`] (an older version, during a rolling
    /// upgrade) never reads a payload it cannot parse.
    pub(crate) fn settled_channel(&self) -> String {
        format!("{}.settled", self.name)
    }
}
