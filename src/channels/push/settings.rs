//! `[push]` settings: Web Push to the devices people subscribe from the inbox, the contact
//! the push services are given, and how much a notification says.

use serde::{Deserialize, Serialize};

/// `[push]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PushSettings {
    /// Whether the channel runs (the inbox then offers "Notify me on this device").
    pub enabled: bool,
    /// The contact push services are given in every VAPID signature (RFC 8292): a
    /// `mailto:` address or an `https:` URL. Empty: `server.public_url` when it is https.
    pub subject: String,
    /// Whether a notification carries the command or question text; `false` says only that
    /// something waits ("an approval is waiting in shop").
    pub include_command: bool,
    /// How many devices one person may subscribe; the oldest goes when one more subscribes.
    pub max_devices_per_person: usize,
    /// How long an action token in a notification stays good, seconds (at most the
    /// interaction's deadline).
    pub action_ttl_secs: u64,
    /// Per-request timeout, seconds.
    pub timeout_secs: u64,
    /// The language of notifications and their buttons (`en_us` or `zh_cn`).
    pub locale: crate::present::render::Locale,
    /// More than this many pending for one device: one digest notification per agent
    /// session instead of one each (0: only for a burst).
    pub digest_after: u32,
}

impl Default for PushSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            subject: String::new(),
            include_command: true,
            max_devices_per_person: 10,
            action_ttl_secs: 900,
            timeout_secs: 10,
            locale: crate::present::render::Locale::EnUs,
            digest_after: 0,
        }
    }
}

impl PushSettings {
    /// Every mistake in the section, each naming the setting and its fix.
    pub fn mistakes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.enabled {
            return out;
        }
        let s = self.subject.trim();
        if !(s.is_empty() || s.starts_with("mailto:") || s.starts_with("https://")) {
            out.push(format!(
                "push.subject = {s:?} must be a mailto: address or an https:// URL that reaches \
                 whoever runs imrelay, like subject = \"mailto:ops@example.com\" (push services \
                 refuse other contacts)"
            ));
        }
        if !(1..=100).contains(&self.max_devices_per_person) {
            out.push(format!(
                "push.max_devices_per_person = {} is out of range: use 1 to 100",
                self.max_devices_per_person
            ));
        }
        if !(30..=86_400).contains(&self.action_ttl_secs) {
            out.push(format!(
                "push.action_ttl_secs = {} is out of range: use 30 to 86400 (a day)",
                self.action_ttl_secs
            ));
        }
        if self.timeout_secs == 0 {
            out.push("push.timeout_secs must be at least 1".into());
        }
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            out.push(format!(
                "push.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        out
    }

    /// The VAPID contact: `subject`, else `public_url` when it is https; `None` when neither
    /// is usable.
    pub(super) fn contact(&self, public_url: &str) -> Option<String> {
        match self.subject.trim() {
            "" if public_url.starts_with("https://") => Some(public_url.to_string()),
            "" => None,
            s => Some(s.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mistake_is_said_at_once_with_its_setting() {
        let s = PushSettings {
            enabled: true,
            subject: "ops@example.com".into(),
            max_devices_per_person: 0,
            action_ttl_secs: 5,
            timeout_secs: 0,
            ..PushSettings::default()
        };
        let m = s.mistakes().join("\n");
        for needle in [
            "push.subject",
            "push.max_devices_per_person",
            "push.action_ttl_secs",
            "push.timeout_secs",
        ] {
            assert!(m.contains(needle), "{needle} missing from {m}");
        }
        assert!(PushSettings::default().mistakes().is_empty());
    }

    #[test]
    fn the_contact_is_the_subject_or_an_https_public_url() {
        let s = PushSettings::default();
        assert_eq!(s.contact("http://127.0.0.1:8787"), None);
        assert_eq!(
            s.contact("https://relay.example.com").as_deref(),
            Some("https://relay.example.com")
        );
        let s = PushSettings {
            subject: "mailto:ops@example.com".into(),
            ..s
        };
        assert_eq!(
            s.contact("http://x").as_deref(),
            Some("mailto:ops@example.com")
        );
    }
}
