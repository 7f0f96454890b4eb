//! `[feishu]` settings: the app's credentials, where cards go, who may answer, and how card
//! clicks reach imrelay (a long connection or a public callback URL).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::channels::threads::ThreadPer;
use crate::settings::{PathClaim, Secret};

/// Which open platform the app lives on: Feishu (China) or Lark (international).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Domain {
    /// `https://open.feishu.cn`
    Feishu,
    /// `https://open.larksuite.com`
    Lark,
}

impl Domain {
    /// The platform's OpenAPI base URL.
    pub fn base_url(self) -> &'static str {
        match self {
            Domain::Feishu => "https://open.feishu.cn",
            Domain::Lark => "https://open.larksuite.com",
        }
    }
}

/// How card clicks reach imrelay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// imrelay keeps a long connection (WebSocket) open to the platform: no public URL needed.
    Websocket,
    /// The platform POSTs callbacks to `callback_path` on this server's public URL.
    Webhook,
}

impl Mode {
    /// The lowercase label used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Websocket => "websocket",
            Mode::Webhook => "webhook",
        }
    }
}

/// The language of card text.
pub use crate::present::render::Locale;

/// The kind of id a receiver is given as (the `receive_id_type` of the send API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiverType {
    /// A group chat (`oc_...`).
    ChatId,
    /// A user, by open_id (`ou_...`).
    OpenId,
    /// A user, by user_id.
    UserId,
    /// A user, by union_id (`on_...`).
    UnionId,
    /// A user, by email.
    Email,
}

impl ReceiverType {
    /// The API's name for this id type.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverType::ChatId => "chat_id",
            ReceiverType::OpenId => "open_id",
            ReceiverType::UserId => "user_id",
            ReceiverType::UnionId => "union_id",
            ReceiverType::Email => "email",
        }
    }
}

impl FromStr for ReceiverType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "chat_id" => ReceiverType::ChatId,
            "open_id" => ReceiverType::OpenId,
            "user_id" => ReceiverType::UserId,
            "union_id" => ReceiverType::UnionId,
            "email" => ReceiverType::Email,
            other => {
                return Err(format!(
                    "unknown receiver type {other:?} (expected chat_id, open_id, user_id, union_id or email)"
                ));
            }
        })
    }
}

/// Where cards are posted: a group chat or a user's direct messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Receiver {
    /// How `id` is to be read.
    #[serde(rename = "type")]
    pub kind: ReceiverType,
    /// The chat id, open_id, user_id, union_id or email.
    pub id: String,
}

impl Receiver {
    /// The receiver as one string, `type:id` (stored as a card's address).
    pub fn address(&self) -> String {
        format!("{}:{}", self.kind.as_str(), self.id)
    }
}

impl fmt::Display for Receiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.address())
    }
}

/// `type:id`, as written in the environment (`IMRELAY__FEISHU__CHATS=chat_id:oc_1,open_id:ou_2`).
impl FromStr for Receiver {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, id) = s
            .split_once(':')
            .ok_or_else(|| format!("receiver {s:?}: expected TYPE:ID, e.g. chat_id:oc_123"))?;
        Ok(Receiver {
            kind: kind.trim().parse()?,
            id: id.trim().to_string(),
        })
    }
}

/// `[feishu]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FeishuSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// How card clicks arrive.
    #[serde(rename = "transport", alias = "mode")]
    pub mode: Mode,
    /// Feishu or Lark.
    pub domain: Domain,
    /// Overrides the OpenAPI base URL (empty: the domain's).
    #[serde(rename = "api_url", alias = "base_url")]
    pub base_url: String,
    /// The app's App ID (`cli_...`).
    pub app_id: String,
    /// The app's App Secret.
    pub app_secret: Secret,
    /// The Verification Token of the app's event and callback settings.
    pub verification_token: Secret,
    /// The Encrypt Key of the app's event and callback settings (empty: no encryption).
    pub encrypt_key: Secret,
    /// Where cards are posted.
    #[serde(deserialize_with = "crate::settings::list")]
    #[serde(rename = "chats", alias = "receivers")]
    pub receivers: Vec<Receiver>,
    /// Who may answer: open_ids or user_ids. Empty: nobody.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// The language of card text.
    pub locale: Locale,
    /// The path of the callback endpoint (webhook mode).
    #[serde(rename = "inbound_path", alias = "callback_path")]
    pub callback_path: String,
    /// Websocket mode: how long opening the connection (TCP, TLS and the WebSocket handshake)
    /// may take before it is abandoned and retried, seconds.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_secs: u64,
    /// More than this many interactions pending for one receiver: further ones are shown in
    /// one digest card per session instead of a card each. 0: never.
    #[serde(default)]
    pub digest_after: u32,
    /// Where each agent session's prompts go: `none` (in the chat) or `session` (a reply
    /// thread per session, under a first message that names it).
    #[serde(default)]
    pub thread_per: ThreadPer,
    /// Whether the outcome is also posted as a reply in each message's thread.
    #[serde(default)]
    pub thread_replies: bool,
}

fn default_connect_timeout() -> u64 {
    15
}

impl Default for FeishuSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: Mode::Websocket,
            domain: Domain::Feishu,
            base_url: String::new(),
            app_id: String::new(),
            app_secret: Secret::new(""),
            verification_token: Secret::new(""),
            encrypt_key: Secret::new(""),
            receivers: Vec::new(),
            approvers: Vec::new(),
            locale: Locale::ZhCn,
            callback_path: "/feishu/callback".into(),
            connect_timeout_secs: default_connect_timeout(),
            digest_after: 0,
            thread_per: ThreadPer::None,
            thread_replies: false,
        }
    }
}

impl FeishuSettings {
    /// The paths on this server the channel serves as configured: its callback path, when
    /// enabled in webhook mode.
    pub fn paths(&self) -> Vec<PathClaim> {
        if self.enabled && self.mode == Mode::Webhook {
            vec![PathClaim::new("feishu.inbound_path", &self.callback_path)]
        } else {
            Vec::new()
        }
    }

    /// The effective OpenAPI base URL, without a trailing slash.
    pub fn api_base(&self) -> String {
        let url = self.base_url.trim().trim_end_matches('/');
        if url.is_empty() {
            self.domain.base_url().to_string()
        } else {
            url.to_string()
        }
    }

    /// Whether `operator` (an open_id or user_id) may answer.
    pub fn is_approver(&self, id: &str) -> bool {
        !id.is_empty() && self.approvers.iter().any(|a| a == id)
    }

    /// Checks values that only make sense together; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "feishu.digest_after is {}: give 0 (no digests) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        let url = self.base_url.trim();
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "feishu.api_url must start with http:// or https:// (got {url:?})"
            ));
        }
        let path = &self.callback_path;
        if !path.starts_with('/') || path.len() < 2 || path.contains(char::is_whitespace) {
            return Err(format!(
                "feishu.inbound_path must be a path such as \"/feishu/callback\" (got {path:?})"
            ));
        }
        if crate::wire::is_own_path(path) {
            return Err(format!(
                "feishu.inbound_path {path:?} collides with one of imrelay's own endpoints"
            ));
        }
        for (i, r) in self.receivers.iter().enumerate() {
            if r.id.trim().is_empty() {
                return Err(format!("feishu.chats[{i}].id must not be empty"));
            }
            if self.receivers[..i].contains(r) {
                return Err(format!("feishu.chats lists {r} twice"));
            }
        }
        if !(1..=300).contains(&self.connect_timeout_secs) {
            return Err(format!(
                "feishu.connect_timeout_secs must be between 1 and 300 (got {})",
                self.connect_timeout_secs
            ));
        }
        if self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err("feishu.approvers must not contain empty ids".into());
        }
        if !self.enabled {
            return Ok(());
        }
        let mut missing = Vec::new();
        if self.app_id.trim().is_empty() {
            missing.push("feishu.app_id");
        }
        if self.app_secret.is_empty() {
            missing.push("feishu.app_secret");
        }
        if self.mode == Mode::Webhook && self.verification_token.is_empty() {
            missing.push("feishu.verification_token (required in webhook mode)");
        }
        if !missing.is_empty() {
            return Err(format!(
                "feishu is enabled but these are not set: {}",
                missing.join(", ")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> FeishuSettings {
        FeishuSettings {
            enabled: true,
            app_id: "cli_1".into(),
            app_secret: Secret::new("s"),
            verification_token: Secret::new("v"),
            receivers: vec!["chat_id:oc_1".parse().unwrap()],
            approvers: vec!["ou_1".into()],
            ..FeishuSettings::default()
        }
    }

    #[test]
    fn receivers_parse_from_the_environment_form() {
        let r: Receiver = "open_id: ou_abc".parse().unwrap();
        assert_eq!(r.kind, ReceiverType::OpenId);
        assert_eq!(r.id, "ou_abc");
        assert_eq!(r.address(), "open_id:ou_abc");
        assert!("nope".parse::<Receiver>().is_err());
        assert!("group:1".parse::<Receiver>().is_err());
    }

    #[test]
    fn combinations_are_checked() {
        assert!(enabled().validate().is_ok());
        assert!(FeishuSettings::default().validate().is_ok());
        let mut s = enabled();
        s.app_secret = Secret::new("");
        assert!(s.validate().unwrap_err().contains("feishu.app_secret"));
        let mut s = enabled();
        s.verification_token = Secret::new("");
        assert!(s.validate().is_ok(), "not needed for the long connection");
        s.mode = Mode::Webhook;
        assert!(s.validate().unwrap_err().contains("verification_token"));
        let mut s = enabled();
        // No chats: accepted (cards reach people's direct messages; ids can be learnt).
        s.receivers.clear();
        assert!(s.validate().is_ok());
        assert!(
            crate::channels::Channel::warnings(&s)
                .concat()
                .contains("feishu.chats is empty")
        );
        let mut s = enabled();
        s.receivers.push(s.receivers[0].clone());
        assert!(s.validate().unwrap_err().contains("twice"));
        let mut s = enabled();
        s.callback_path = "/v1/interactions".into();
        assert!(s.validate().unwrap_err().contains("collides"));
        let mut s = enabled();
        s.callback_path = "callback".into();
        assert!(s.validate().is_err());
        let mut s = enabled();
        s.base_url = "ftp://x".into();
        assert!(s.validate().is_err());
        let mut s = enabled();
        s.connect_timeout_secs = 0;
        assert!(s.validate().unwrap_err().contains("connect_timeout_secs"));
        // Empty approvers are allowed (and announced loudly at start-up).
        let mut s = enabled();
        s.approvers.clear();
        assert!(s.validate().is_ok());
    }

    #[test]
    fn base_url_follows_the_domain_unless_overridden() {
        let mut s = enabled();
        assert_eq!(s.api_base(), "https://open.feishu.cn");
        s.domain = Domain::Lark;
        assert_eq!(s.api_base(), "https://open.larksuite.com");
        s.base_url = "http://127.0.0.1:9/".into();
        assert_eq!(s.api_base(), "http://127.0.0.1:9");
    }
}
