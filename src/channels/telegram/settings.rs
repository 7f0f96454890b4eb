//! The `[telegram]` settings and the checks that only make sense on them together.

use serde::{Deserialize, Serialize};

use crate::channels::threads::ThreadPer;
use crate::settings::{PathClaim, Secret};

/// How updates (taps, replies, commands) reach imrelay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// imrelay long-polls `getUpdates`: no public URL needed (the default).
    Polling,
    /// Telegram posts updates to `webhook_path` on this server, reached at `webhook_url`.
    Webhook,
}

impl Mode {
    /// As `telegram.mode` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Polling => "polling",
            Mode::Webhook => "webhook",
        }
    }
}

/// `[telegram]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramSettings {
    /// Whether the channel runs at all.
    pub enabled: bool,
    /// The bot token from BotFather.
    pub token: Secret,
    /// Chats (private chats, groups) where prompts are posted.
    #[serde(deserialize_with = "crate::settings::list")]
    pub chats: Vec<i64>,
    /// Telegram user ids allowed to answer. Empty: nobody can answer from Telegram.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<u64>,
    /// Polling (default) or webhook.
    #[serde(rename = "transport", alias = "mode")]
    pub mode: Mode,
    /// The public HTTPS URL Telegram posts updates to (webhook mode).
    pub webhook_url: String,
    /// The path on this server that receives webhook updates.
    #[serde(rename = "inbound_path", alias = "webhook_path")]
    pub webhook_path: String,
    /// The secret Telegram echoes in `X-Telegram-Bot-Api-Secret-Token`. Empty: one is derived
    /// from a persistent server secret.
    pub webhook_secret: Secret,
    /// The Bot API base URL (a self-hosted Bot API server, or a fake in tests).
    pub api_url: String,
    /// How long one `getUpdates` long poll waits for updates, in seconds.
    pub poll_timeout_secs: u64,
    /// Upper bound for one Bot API call (other than the long poll), in seconds.
    pub request_timeout_secs: u64,
    /// More than this many interactions pending for one chat: further ones are shown in one
    /// digest message per session instead of a message each. 0: never.
    #[serde(default)]
    pub digest_after: u32,
    /// Where each agent session's prompts go: `none` (in the chat) or `session` (a forum
    /// topic per session, in a group whose topics are on).
    #[serde(default)]
    pub thread_per: ThreadPer,
    /// Whether the outcome is also posted as a reply to each message.
    #[serde(default)]
    pub thread_replies: bool,
    /// The language of messages, toasts, replies and digests (`en_us` or `zh_cn`).
    pub locale: crate::present::render::Locale,
}

/// Characters Telegram accepts in a webhook secret token.
fn valid_secret_token(s: &str) -> bool {
    (1..=256).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `token` has the shape of a bot token: `<bot id>:<secret>`.
fn looks_like_token(token: &str) -> bool {
    match token.split_once(':') {
        Some((id, rest)) => {
            !id.is_empty()
                && id.chars().all(|c| c.is_ascii_digit())
                && !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        }
        None => false,
    }
}

fn http_url(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://")) && reqwest::Url::parse(url).is_ok()
}

/// Telegram only delivers webhooks over HTTPS.
fn https_url(url: &str) -> bool {
    url.starts_with("https://")
        && reqwest::Url::parse(url).is_ok_and(|u| u.host_str().is_some_and(|h| !h.is_empty()))
}

impl TelegramSettings {
    /// The paths on this server the channel serves as configured: its webhook path, when
    /// enabled in webhook mode.
    pub fn paths(&self) -> Vec<PathClaim> {
        if self.enabled && self.mode == Mode::Webhook {
            vec![PathClaim::new("telegram.inbound_path", &self.webhook_path)]
        } else {
            Vec::new()
        }
    }

    /// Checks the settings; an error names the offending key. Nothing is checked when the
    /// channel is disabled.
    pub fn validate(&self) -> Result<(), String> {
        // Ids that cannot be right are refused even while the channel is off.
        if self.chats.contains(&0) {
            return Err("telegram.chats lists 0, which is not a chat id. Chat ids are numbers like -1001234567890 (a group) or 123456789 (a private chat): send /whoami to the bot in that chat to see its id".into());
        }
        if self.approvers.contains(&0) {
            return Err("telegram.approvers lists 0, which is not a user id. User ids are positive numbers like 123456789: send /whoami to the bot to see yours".into());
        }
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "telegram.digest_after is {}: give 0 (no digests) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        if !self.enabled {
            return Ok(());
        }
        let token = self.token.expose();
        if token.is_empty() {
            return Err(
                "telegram.enabled is true but telegram.token is empty: create a bot with @BotFather and set its token".into(),
            );
        }
        if !looks_like_token(token) {
            return Err(
                "telegram.token does not look like a bot token (expected <digits>:<letters, digits, _ or ->)".into(),
            );
        }
        if !http_url(self.api_url.trim()) {
            return Err(format!(
                "telegram.api_url must be an http:// or https:// URL (got {:?})",
                self.api_url
            ));
        }
        let path = &self.webhook_path;
        if !path.starts_with('/') || path.len() < 2 || path.contains(char::is_whitespace) {
            return Err(format!(
                "telegram.inbound_path must start with / and name a path (got {path:?})"
            ));
        }
        if crate::wire::is_own_path(path) {
            return Err(format!(
                "telegram.inbound_path {path:?} collides with one of imrelay's own endpoints"
            ));
        }
        if self.mode == Mode::Webhook {
            let url = self.webhook_url.trim();
            if url.is_empty() {
                return Err(
                    "telegram.transport is \"webhook\" but telegram.webhook_url is empty: set the public https:// URL that reaches telegram.inbound_path, or use transport = \"polling\"".into(),
                );
            }
            if !https_url(url) {
                return Err(format!(
                    "telegram.webhook_url must be an https:// URL: Telegram delivers webhooks over HTTPS only (got {url:?})"
                ));
            }
        }
        let secret = self.webhook_secret.expose();
        if !secret.is_empty() && !valid_secret_token(secret) {
            return Err(
                "telegram.webhook_secret must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -"
                    .into(),
            );
        }
        if !(1..=50).contains(&self.poll_timeout_secs) {
            return Err("telegram.poll_timeout_secs must be between 1 and 50".into());
        }
        if !(1..=300).contains(&self.request_timeout_secs) {
            return Err("telegram.request_timeout_secs must be between 1 and 300".into());
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = self.chats.iter().find(|c| !seen.insert(**c)) {
            return Err(format!("telegram.chats lists {dup} twice"));
        }
        Ok(())
    }

    /// The numeric bot id: the part of the token before the colon.
    pub fn bot_id(&self) -> &str {
        self.token
            .expose()
            .split_once(':')
            .map(|(id, _)| id)
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> TelegramSettings {
        TelegramSettings {
            enabled: true,
            token: Secret::new("123456:ABC-def_123"),
            chats: vec![1],
            approvers: vec![1],
            mode: Mode::Polling,
            webhook_url: String::new(),
            webhook_path: "/telegram/webhook".into(),
            webhook_secret: Secret::new(""),
            api_url: "https://api.telegram.org".into(),
            poll_timeout_secs: 25,
            request_timeout_secs: 30,
            digest_after: 0,
            thread_per: Default::default(),
            thread_replies: false,
            locale: crate::present::render::Locale::EnUs,
        }
    }

    #[test]
    fn a_complete_configuration_passes() {
        assert_eq!(base().validate(), Ok(()));
        assert_eq!(base().bot_id(), "123456");
    }

    #[test]
    fn digests_take_zero_or_a_bounded_number() {
        let with = |n| TelegramSettings {
            digest_after: n,
            ..base()
        };
        assert_eq!(with(5).validate(), Ok(()));
        let e = with(5000).validate().unwrap_err();
        assert!(
            e.contains("telegram.digest_after") && e.contains("at most 1000"),
            "{e}"
        );
    }

    #[test]
    fn the_compiled_in_defaults_are_the_documented_ones() {
        let t = crate::config::Settings::defaults().unwrap().telegram;
        assert!(!t.enabled);
        assert!(t.token.is_empty() && t.webhook_secret.is_empty());
        assert!(t.chats.is_empty() && t.approvers.is_empty());
        assert_eq!(t.mode, Mode::Polling);
        assert_eq!(t.webhook_path, "/telegram/webhook");
        assert_eq!(t.api_url, "https://api.telegram.org");
        assert_eq!((t.poll_timeout_secs, t.request_timeout_secs), (25, 30));
        assert_eq!(t.locale, crate::present::render::Locale::EnUs);
    }

    #[test]
    fn combinations_are_checked() {
        let mut s = base();
        s.token = Secret::new("");
        assert!(s.validate().unwrap_err().contains("telegram.token"));
        s.enabled = false;
        assert_eq!(s.validate(), Ok(()), "nothing is checked when disabled");

        let mut s = base();
        s.token = Secret::new("not a token");
        assert!(s.validate().unwrap_err().contains("does not look like"));

        let mut s = base();
        s.mode = Mode::Webhook;
        assert!(s.validate().unwrap_err().contains("webhook_url"));
        s.webhook_url = "ftp://x".into();
        assert!(s.validate().unwrap_err().contains("webhook_url"));
        // Telegram refuses plain HTTP webhooks; say so at start-up, not at setWebhook.
        s.webhook_url = "http://relay.example.com/telegram/webhook".into();
        let e = s.validate().unwrap_err();
        assert!(
            e.contains("telegram.webhook_url") && e.contains("https://"),
            "{e}"
        );
        s.webhook_url = "https://".into();
        assert!(s.validate().unwrap_err().contains("webhook_url"));
        s.webhook_url = "https://relay.example.com/telegram/webhook".into();
        assert_eq!(s.validate(), Ok(()));
        s.webhook_secret = Secret::new("has space");
        assert!(s.validate().unwrap_err().contains("webhook_secret"));

        let mut s = base();
        s.api_url = "api.telegram.org".into();
        assert!(s.validate().unwrap_err().contains("api_url"));

        let mut s = base();
        s.webhook_path = "telegram".into();
        assert!(s.validate().unwrap_err().contains("inbound_path"));
        s.webhook_path = "/healthz".into();
        assert!(s.validate().unwrap_err().contains("collides"));
        s.webhook_path = "/v1/interactions".into();
        assert!(s.validate().unwrap_err().contains("collides"));

        let mut s = base();
        s.poll_timeout_secs = 0;
        assert!(s.validate().unwrap_err().contains("poll_timeout_secs"));

        let mut s = base();
        s.chats = vec![5, 5];
        assert!(s.validate().unwrap_err().contains("twice"));
    }
}
