//! `[ntfy]` settings: the ntfy server, its credentials, the topics prompts go to, who answers
//! through the action buttons, and how much a notification says.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::settings::Secret;

/// `[ntfy]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NtfySettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// The ntfy server: self-hosted, or `https://ntfy.sh`.
    pub api_url: String,
    /// Topics prompts are published to (a route names them as its places): `chats` in the
    /// settings, as on every chat channel (`topics` is the old name).
    #[serde(deserialize_with = "crate::settings::list")]
    #[serde(rename = "chats", alias = "topics")]
    pub topics: Vec<String>,
    /// An access token (`tk_...`), sent as `Authorization: Bearer`.
    pub token: Secret,
    /// A user name for basic auth (with `password`), instead of a token.
    pub username: String,
    /// The password for basic auth.
    pub password: Secret,
    /// The `[[people]]` name an answer through the action buttons counts as.
    pub person: String,
    /// The notification priority, 1 (min) to 5 (max); 3 is ntfy's default.
    pub priority: u8,
    /// Per route (by name): the priority of its prompts, instead of `priority`.
    pub route_priority: BTreeMap<String, u8>,
    /// Whether a notification carries the command or question text; `false` says only that
    /// something waits ("an approval is waiting in shop").
    pub include_command: bool,
    /// imrelay's address as the phone reaches it: the base of the action buttons' URLs.
    /// Empty: `server.public_url`.
    pub public_url: String,
    /// Per-request timeout, seconds.
    pub timeout_secs: u64,
    /// The language of notifications and their buttons (`en_us` or `zh_cn`).
    pub locale: crate::present::render::Locale,
    /// More than this many pending for one topic: one digest notification per agent session
    /// instead of one each (0: only for a burst the topic cannot be published to in time).
    pub digest_after: u32,
}

impl Default for NtfySettings {
    fn default() -> Self {
        Self {
            enabled: false,
            api_url: "https://ntfy.sh".into(),
            topics: Vec::new(),
            token: Secret::new(""),
            username: String::new(),
            password: Secret::new(""),
            person: String::new(),
            priority: 4,
            route_priority: BTreeMap::new(),
            include_command: true,
            public_url: String::new(),
            timeout_secs: 10,
            locale: crate::present::render::Locale::EnUs,
            digest_after: 0,
        }
    }
}

/// Whether `url` is an http(s) URL.
fn is_http(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("http://")
}

/// Whether `t` is a topic ntfy accepts: 1 to 64 of `A-Z a-z 0-9 _ -`.
fn valid_topic(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 64
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl NtfySettings {
    /// Every mistake in the section, each naming the setting and its fix.
    pub fn mistakes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.enabled {
            return out;
        }
        if !is_http(&self.api_url) {
            out.push(format!(
                "ntfy.api_url = {:?} must start with https:// or http://: the ntfy server, \
                 like \"https://ntfy.sh\" or \"https://ntfy.example.com\"",
                self.api_url
            ));
        }
        if self.topics.is_empty() {
            out.push(
                "ntfy.chats is empty: name the topic(s) prompts go to, like chats = [\"imrelay-alice-7f3k\"] \
                 (on a public server the topic name is the password: pick one nobody guesses)"
                    .into(),
            );
        }
        for t in self.topics.iter().filter(|t| !valid_topic(t)) {
            out.push(format!(
                "ntfy.chats: {t:?} is not a topic ntfy accepts: use 1 to 64 of A-Z, a-z, 0-9, _ and -"
            ));
        }
        if !self.token.is_empty() && !self.username.is_empty() {
            out.push(
                "ntfy: both token and username are set: use an access token (token) or basic auth \
                 (username and password), not both"
                    .into(),
            );
        }
        if self.username.is_empty() != self.password.is_empty() {
            out.push("ntfy: basic auth needs both ntfy.username and ntfy.password".into());
        }
        if self.person.trim().is_empty() {
            out.push(
                "ntfy.person is empty: name the [[people]] entry whose phone gets the notifications, \
                 like person = \"alice\"; an answer through its buttons counts as that person"
                    .into(),
            );
        }
        for (what, p) in std::iter::once(("ntfy.priority".to_string(), self.priority)).chain(
            self.route_priority
                .iter()
                .map(|(r, p)| (format!("ntfy.route_priority.{r}"), *p)),
        ) {
            if !(1..=5).contains(&p) {
                out.push(format!(
                    "{what} = {p} is out of range: use 1 (min) to 5 (max); 3 is ntfy's default"
                ));
            }
        }
        if !self.public_url.is_empty() && !is_http(&self.public_url) {
            out.push(format!(
                "ntfy.public_url = {:?} must start with https:// or http://: imrelay's address as \
                 the phone reaches it",
                self.public_url
            ));
        }
        if self.timeout_secs == 0 {
            out.push("ntfy.timeout_secs must be at least 1".into());
        }
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            out.push(format!(
                "ntfy.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        out
    }

    /// The priority of a prompt that took route `route`.
    pub(super) fn priority_for(&self, route: Option<&str>) -> u8 {
        route
            .and_then(|r| self.route_priority.get(r))
            .copied()
            .unwrap_or(self.priority)
    }

    /// `req` with the configured credentials: a bearer token, basic auth, or none.
    pub(super) fn authorize(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if !self.token.is_empty() {
            req.bearer_auth(self.token.expose())
        } else if !self.username.is_empty() {
            req.basic_auth(&self.username, Some(self.password.expose()))
        } else {
            req
        }
    }

    /// The server's address without a trailing slash.
    pub(super) fn base(&self) -> &str {
        self.api_url.trim_end_matches('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mistake_is_said_at_once_with_its_setting() {
        let s = NtfySettings {
            enabled: true,
            api_url: "ntfy.sh".into(),
            topics: vec!["a b".into()],
            username: "u".into(),
            priority: 9,
            timeout_secs: 0,
            digest_after: 5000,
            ..NtfySettings::default()
        };
        let m = s.mistakes().join("\n");
        for needle in [
            "ntfy.api_url",
            "\"a b\"",
            "ntfy.username and ntfy.password",
            "ntfy.person",
            "ntfy.priority = 9",
            "ntfy.timeout_secs",
            "ntfy.digest_after is 5000",
        ] {
            assert!(m.contains(needle), "{needle} missing from {m}");
        }
        assert!(NtfySettings::default().mistakes().is_empty());
    }

    #[test]
    fn a_route_may_have_its_own_priority() {
        let s = NtfySettings {
            route_priority: [("prod".to_string(), 5)].into(),
            ..NtfySettings::default()
        };
        assert_eq!(s.priority_for(Some("prod")), 5);
        assert_eq!(s.priority_for(Some("dev")), 4);
        assert_eq!(s.priority_for(None), 4);
    }

    #[test]
    fn secrets_never_show() {
        let s = NtfySettings {
            token: Secret::new("tk_secret"),
            password: Secret::new("pw"),
            ..NtfySettings::default()
        };
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("tk_secret") && !shown.contains("\"pw\""),
            "{shown}"
        );
    }
}
