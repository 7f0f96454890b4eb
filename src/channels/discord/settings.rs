//! `[discord]` settings: the bot's token, how interactions reach imrelay (the Gateway, or the
//! HTTP interactions endpoint with the application's public key), where prompts go and who
//! may answer.

use serde::{Deserialize, Serialize};

use crate::channels::threads::ThreadPer;
use crate::present::render::Locale;
use crate::settings::{PathClaim, Secret};

/// Discord's REST base URL (API version 10).
pub const DEFAULT_API_URL: &str = "https://discord.com/api/v10";
/// Discord's Gateway URL (the one `GET /gateway` answers; the version and encoding are added).
pub const DEFAULT_GATEWAY_URL: &str = "wss://gateway.discord.gg";

/// How interactions (button clicks, select menus, modal submissions) reach imrelay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// imrelay holds a Gateway WebSocket with the bot token: no public URL needed.
    Gateway,
    /// Discord POSTs them to `inbound_path` on this server's public URL, signed with the
    /// application's Ed25519 key.
    Interactions,
}

impl Transport {
    /// The lowercase label used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Gateway => "gateway",
            Transport::Interactions => "interactions",
        }
    }
}

/// `[discord]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// How interactions arrive.
    pub transport: Transport,
    /// The bot's token (Developer Portal → Bot → Reset Token): posts and edits messages,
    /// opens the Gateway.
    pub bot_token: Secret,
    /// The application's public key (Developer Portal → General Information), hex: checks
    /// the signatures of requests to the interactions endpoint.
    pub public_key: String,
    /// Overrides the REST base URL (a proxy, or a test server). Empty: Discord's.
    pub api_url: String,
    /// Overrides the Gateway URL. Empty: Discord's.
    pub gateway_url: String,
    /// Channel ids (snowflakes, "1234..." as text) prompts are posted to.
    #[serde(deserialize_with = "crate::settings::list")]
    pub chats: Vec<String>,
    /// Discord user ids who may answer. Empty: nobody.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// The language of messages, modals and notices (`en_us` or `zh_cn`).
    pub locale: Locale,
    /// Gateway: how long opening the connection (TCP, TLS, handshake, `Hello`) may take
    /// before it is abandoned and retried, seconds.
    pub connect_timeout_secs: u64,
    /// Interactions transport: the path Discord's interaction requests are sent to.
    pub inbound_path: String,
    /// Digests: more than this many interactions pending for one place, further ones are
    /// shown in one digest message per agent session. 0: only when the place's queue
    /// cannot be posted before the requests' deadlines.
    pub digest_after: u32,
    /// Where each agent session's prompts go: `none` (in the channel) or `session` (a
    /// thread per session, started from a message that names it).
    pub thread_per: ThreadPer,
    /// Whether the outcome is also posted as a reply to each message.
    pub thread_replies: bool,
}

impl Default for DiscordSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            transport: Transport::Gateway,
            bot_token: Secret::new(""),
            public_key: String::new(),
            api_url: String::new(),
            gateway_url: String::new(),
            chats: Vec::new(),
            approvers: Vec::new(),
            locale: Locale::EnUs,
            connect_timeout_secs: 15,
            inbound_path: "/discord/interactions".into(),
            digest_after: 0,
            thread_per: ThreadPer::None,
            thread_replies: false,
        }
    }
}

/// Whether `s` is a snowflake: 17 to 20 digits.
pub(crate) fn is_snowflake(s: &str) -> bool {
    (1..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

/// What is wrong with `value` as a Discord id (`what`: "channel", "user"), with how to find
/// the id.
pub(crate) fn not_an_id(value: &str, what: &str) -> Option<String> {
    if is_snowflake(value) {
        return None;
    }
    Some(format!(
        "{value:?} is not a Discord {what} id (a number such as \"1234567890123456789\"): turn on \
         Developer Mode (User Settings → Advanced), then right-click the {what} → Copy {} ID",
        if what == "user" { "User" } else { "Channel" }
    ))
}

impl DiscordSettings {
    fn base(value: &str, default: &str) -> String {
        let url = value.trim().trim_end_matches('/');
        if url.is_empty() {
            default.to_string()
        } else {
            url.to_string()
        }
    }

    /// The effective REST base URL, without a trailing slash.
    pub fn api_url(&self) -> String {
        Self::base(&self.api_url, DEFAULT_API_URL)
    }

    /// The effective Gateway URL, without a trailing slash or query.
    pub fn gateway_url(&self) -> String {
        Self::base(&self.gateway_url, DEFAULT_GATEWAY_URL)
    }

    /// The paths on this server the channel serves: its interactions endpoint, when enabled
    /// with that transport.
    pub fn paths(&self) -> Vec<PathClaim> {
        if self.enabled && self.transport == Transport::Interactions {
            vec![PathClaim::new("discord.inbound_path", &self.inbound_path)]
        } else {
            Vec::new()
        }
    }

    /// Whether Discord user `id` may answer.
    pub fn is_approver(&self, id: &str) -> bool {
        !id.is_empty() && self.approvers.iter().any(|a| a == id)
    }

    /// The application's public key, when it is 32 bytes of hex.
    pub fn public_key_bytes(&self) -> Option<Vec<u8>> {
        hex::decode(self.public_key.trim())
            .ok()
            .filter(|k| k.len() == 32)
    }

    /// Checks values that only make sense together; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        for (key, url, schemes) in [
            ("discord.api_url", &self.api_url, ["http://", "https://"]),
            (
                "discord.gateway_url",
                &self.gateway_url,
                ["ws://", "wss://"],
            ),
        ] {
            let url = url.trim();
            if !(url.is_empty() || schemes.iter().any(|s| url.starts_with(s))) {
                return Err(format!(
                    "{key} must start with {} or {} (got {url:?})",
                    schemes[0], schemes[1]
                ));
            }
        }
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "discord.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        if !(1..=300).contains(&self.connect_timeout_secs) {
            return Err(format!(
                "discord.connect_timeout_secs must be between 1 and 300 (got {})",
                self.connect_timeout_secs
            ));
        }
        let path = &self.inbound_path;
        if !path.starts_with('/') || path.len() < 2 || path.contains(char::is_whitespace) {
            return Err(format!(
                "discord.inbound_path must be a path such as \"/discord/interactions\" (got {path:?})"
            ));
        }
        if crate::wire::is_own_path(path) {
            return Err(format!(
                "discord.inbound_path {path:?} collides with one of imrelay's own endpoints"
            ));
        }
        for (i, c) in self.chats.iter().enumerate() {
            if self.chats[..i].contains(c) {
                return Err(format!("discord.chats lists {c} twice"));
            }
        }
        if !self.enabled {
            return Ok(());
        }
        if self.bot_token.is_empty() {
            return Err("discord is enabled but discord.bot_token is not set".into());
        }
        if self.transport == Transport::Interactions && self.public_key_bytes().is_none() {
            return Err(
                "discord.transport = \"interactions\" needs discord.public_key: the application's \
                 public key, 64 hex characters (Developer Portal → General Information)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Ids that read but can never work, each with its fix.
    pub fn problems(&self) -> Vec<String> {
        let chats = self.chats.iter().enumerate().filter_map(|(j, c)| {
            not_an_id(c, "channel").map(|why| format!("discord.chats[{j}]: {why}"))
        });
        let approvers = self.approvers.iter().enumerate().filter_map(|(j, a)| {
            not_an_id(a, "user").map(|why| format!("discord.approvers[{j}]: {why}"))
        });
        chats.chain(approvers).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> DiscordSettings {
        DiscordSettings {
            enabled: true,
            bot_token: Secret::new("token-1"),
            chats: vec!["2000000000000000001".into()],
            approvers: vec!["6000000000000000001".into()],
            ..DiscordSettings::default()
        }
    }

    #[test]
    fn combinations_are_checked() {
        assert!(DiscordSettings::default().validate().is_ok());
        assert!(enabled().validate().is_ok());
        let mut s = enabled();
        s.bot_token = Secret::new("");
        assert!(s.validate().unwrap_err().contains("discord.bot_token"));
        let mut s = enabled();
        s.transport = Transport::Interactions;
        assert!(s.validate().unwrap_err().contains("discord.public_key"));
        s.public_key = "ab".repeat(32);
        assert!(s.validate().is_ok());
        assert_eq!(s.paths().len(), 1);
        let mut s = enabled();
        s.gateway_url = "https://gateway".into();
        assert!(s.validate().unwrap_err().contains("discord.gateway_url"));
        let mut s = enabled();
        s.inbound_path = "/v1/interactions".into();
        assert!(s.validate().unwrap_err().contains("collides"));
        let mut s = enabled();
        s.chats.push(s.chats[0].clone());
        assert!(s.validate().unwrap_err().contains("twice"));
        let mut s = enabled();
        // No chats: accepted (prompts reach people's direct messages), with a warning.
        s.chats.clear();
        assert!(s.validate().is_ok());
        assert!(
            crate::channels::Channel::warnings(&s)
                .concat()
                .contains("discord.chats is empty")
        );
        let mut s = enabled();
        s.chats.push("#approvals".into());
        s.approvers.push("@alice".into());
        let problems = s.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("Copy Channel ID"));
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let shown = format!("{:?}", enabled());
        assert!(!shown.contains("token-1"), "{shown}");
    }
}
