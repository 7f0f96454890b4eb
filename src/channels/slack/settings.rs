//! `[slack]` settings: the app's tokens and signing secret, how interactions reach imrelay
//! (Socket Mode or the HTTP endpoint), how many Socket Mode connections to hold, where
//! prompts go and who may answer.

use serde::{Deserialize, Serialize};

use crate::channels::threads::ThreadPer;
use crate::settings::{PathClaim, Secret};

/// Slack's Web API base URL.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";
/// The most Socket Mode connections Slack accepts for one app at once.
pub const MAX_CONNECTIONS: u8 = 10;

/// How interactions (button clicks, modal submissions) reach imrelay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// imrelay opens WebSockets to Slack with the app-level token: no public URL needed.
    SocketMode,
    /// Slack POSTs to `events_path` on this server's public URL, signed with the signing
    /// secret.
    Http,
}

impl Mode {
    /// The lowercase label used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::SocketMode => "socket_mode",
            Mode::Http => "http",
        }
    }
}

/// `[slack]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// How interactions arrive.
    #[serde(rename = "transport", alias = "mode")]
    pub mode: Mode,
    /// The bot token (`xoxb-...`): posts and updates messages, opens modals.
    pub bot_token: Secret,
    /// The app-level token (`xapp-...`, scope `connections:write`): opens Socket Mode
    /// connections.
    pub app_token: Secret,
    /// The signing secret: authenticates requests to the HTTP endpoint.
    pub signing_secret: Secret,
    /// Overrides the Web API base URL (a proxy, or a test server). Empty: Slack's.
    #[serde(rename = "api_url", alias = "api_base")]
    pub api_base: String,
    /// Socket Mode connections held open at once (1 to 10); Slack hands each envelope to
    /// one of them, so a second one covers the gap while another reconnects.
    pub connections: u8,
    /// Conversation ids (`C...`, `G...`, `D...`) prompts are posted to.
    #[serde(deserialize_with = "crate::settings::list")]
    #[serde(rename = "chats", alias = "channels")]
    pub channels: Vec<String>,
    /// Slack user ids (`U...`, `W...`) who may answer. Empty: nobody.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// Whether the outcome is also posted as a reply in each message's thread (besides the
    /// message itself showing it), so it shows up for people following the thread.
    pub thread_replies: bool,
    /// Where each agent session's prompts go: `none` (in the chat) or `session` (a thread
    /// per session, under a first message that names it).
    pub thread_per: ThreadPer,
    /// HTTP mode: the path Slack's Events and Interactivity requests are sent to.
    #[serde(rename = "inbound_path", alias = "events_path")]
    pub events_path: String,
    /// Socket Mode: how long opening a connection (TCP, TLS, WebSocket handshake and Slack's
    /// `hello`) may take before it is abandoned and retried, seconds.
    pub connect_timeout_secs: u64,
    /// Digests: more than this many interactions pending for one place, further ones are
    /// shown in one digest message per agent session. 0: only when the place's queue
    /// cannot be posted before the requests' deadlines.
    pub digest_after: u32,
    /// The language of messages, modals and notices (`en_us` or `zh_cn`).
    pub locale: crate::present::render::Locale,
}

impl Default for SlackSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: Mode::SocketMode,
            bot_token: Secret::new(""),
            app_token: Secret::new(""),
            signing_secret: Secret::new(""),
            api_base: String::new(),
            connections: 2,
            channels: Vec::new(),
            approvers: Vec::new(),
            thread_replies: false,
            thread_per: ThreadPer::None,
            events_path: "/slack/events".into(),
            connect_timeout_secs: 15,
            digest_after: 0,
            locale: crate::present::render::Locale::EnUs,
        }
    }
}

impl SlackSettings {
    /// The effective Web API base URL, without a trailing slash.
    pub fn api_base(&self) -> String {
        let url = self.api_base.trim().trim_end_matches('/');
        if url.is_empty() {
            DEFAULT_API_BASE.to_string()
        } else {
            url.to_string()
        }
    }

    /// The paths on this server the channel serves as configured: its events path, when
    /// enabled in HTTP mode.
    pub fn paths(&self) -> Vec<PathClaim> {
        if self.enabled && self.mode == Mode::Http {
            vec![PathClaim::new("slack.inbound_path", &self.events_path)]
        } else {
            Vec::new()
        }
    }

    /// Whether Slack user `id` may answer.
    pub fn is_approver(&self, id: &str) -> bool {
        !id.is_empty() && self.approvers.iter().any(|a| a == id)
    }

    /// Checks values that only make sense together; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "slack.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        let url = self.api_base.trim();
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "slack.api_url must start with http:// or https:// (got {url:?})"
            ));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return Err(format!(
                "slack.connections must be between 1 and {MAX_CONNECTIONS} (got {})",
                self.connections
            ));
        }
        if !(1..=300).contains(&self.connect_timeout_secs) {
            return Err(format!(
                "slack.connect_timeout_secs must be between 1 and 300 (got {})",
                self.connect_timeout_secs
            ));
        }
        let path = &self.events_path;
        if !path.starts_with('/') || path.len() < 2 || path.contains(char::is_whitespace) {
            return Err(format!(
                "slack.inbound_path must be a path such as \"/slack/events\" (got {path:?})"
            ));
        }
        if crate::wire::is_own_path(path) {
            return Err(format!(
                "slack.inbound_path {path:?} collides with one of imrelay's own endpoints"
            ));
        }
        for (i, c) in self.channels.iter().enumerate() {
            if c.trim().is_empty() {
                return Err(format!("slack.chats[{i}] must not be empty"));
            }
            if self.channels[..i].contains(c) {
                return Err(format!("slack.chats lists {c} twice"));
            }
        }
        if self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err("slack.approvers must not contain empty ids".into());
        }
        if !self.enabled {
            return Ok(());
        }
        let mut missing = Vec::new();
        if self.bot_token.is_empty() {
            missing.push("slack.bot_token");
        }
        match self.mode {
            Mode::SocketMode if self.app_token.is_empty() => {
                missing.push("slack.app_token (required in socket_mode)")
            }
            Mode::Http if self.signing_secret.is_empty() => {
                missing.push("slack.signing_secret (required in http mode)")
            }
            _ => {}
        }
        if !missing.is_empty() {
            return Err(format!(
                "slack is enabled but these are not set: {}",
                missing.join(", ")
            ));
        }
        // A token pasted into the wrong setting is the commonest set-up mistake; say so
        // before Slack answers `not_allowed_token_type`.
        if !self.bot_token.expose().starts_with("xoxb-") {
            return Err("slack.bot_token must be a bot token (it starts with xoxb-)".into());
        }
        if self.mode == Mode::SocketMode && !self.app_token.expose().starts_with("xapp-") {
            return Err("slack.app_token must be an app-level token (it starts with xapp-)".into());
        }
        Ok(())
    }
}

/// Slack wants ids (`C…` channels, `U…` people): for a `#name` or `@name`, what is wrong and
/// how to find the id.
pub(crate) fn name_not_id(value: &str, channel: bool) -> Option<String> {
    const CHANNEL: &str = "Slack channel ids look like C0123456789: open the channel's details \
        in Slack; its id is at the bottom";
    const USER: &str = "Slack user ids look like U0123456789: open their profile in Slack, \
        then ⋮ → Copy member ID";
    if !(value.starts_with('#') || value.starts_with('@')) {
        return None;
    }
    let (what, how) = if channel {
        ("channel", CHANNEL)
    } else {
        ("user", USER)
    };
    Some(format!("{value:?} is a name, not a {what} id. {how}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> SlackSettings {
        SlackSettings {
            enabled: true,
            bot_token: Secret::new("xoxb-1"),
            app_token: Secret::new("xapp-1"),
            channels: vec!["C1".into()],
            approvers: vec!["U1".into()],
            ..SlackSettings::default()
        }
    }

    #[test]
    fn combinations_are_checked() {
        assert!(SlackSettings::default().validate().is_ok());
        assert!(enabled().validate().is_ok());
        let mut s = enabled();
        s.app_token = Secret::new("");
        assert!(s.validate().unwrap_err().contains("slack.app_token"));
        s.mode = Mode::Http;
        assert!(s.validate().unwrap_err().contains("signing_secret"));
        s.signing_secret = Secret::new("sig");
        assert!(s.validate().is_ok(), "no app token needed over HTTP");
        let mut s = enabled();
        s.bot_token = Secret::new("xapp-swapped");
        assert!(s.validate().unwrap_err().contains("xoxb-"));
        let mut s = enabled();
        s.app_token = Secret::new("xoxb-swapped");
        assert!(s.validate().unwrap_err().contains("xapp-"));
        let mut s = enabled();
        s.connections = 11;
        assert!(s.validate().unwrap_err().contains("slack.connections"));
        s.connections = 0;
        assert!(s.validate().is_err());
        let mut s = enabled();
        s.channels.push("C1".into());
        assert!(s.validate().unwrap_err().contains("twice"));
        let mut s = enabled();
        // No chats: accepted (prompts reach people's direct messages; ids can be learnt).
        s.channels.clear();
        assert!(s.validate().is_ok());
        assert!(
            crate::channels::Channel::warnings(&s)
                .concat()
                .contains("slack.chats is empty")
        );
        let mut s = enabled();
        s.events_path = "/v1/interactions".into();
        assert!(s.validate().unwrap_err().contains("collides"));
        let mut s = enabled();
        s.api_base = "ftp://x".into();
        assert!(s.validate().is_err());
    }

    #[test]
    fn secrets_never_show_in_debug_output() {
        let s = enabled();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("xoxb-1") && !shown.contains("xapp-1"),
            "{shown}"
        );
    }

    #[test]
    fn the_api_base_defaults_to_slack() {
        let mut s = enabled();
        assert_eq!(s.api_base(), "https://slack.com/api");
        s.api_base = "http://127.0.0.1:9/api/".into();
        assert_eq!(s.api_base(), "http://127.0.0.1:9/api");
        assert!(s.paths().is_empty(), "socket mode serves no path");
        s.mode = Mode::Http;
        assert_eq!(s.paths().len(), 1);
    }
}
