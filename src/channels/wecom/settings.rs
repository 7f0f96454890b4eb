//! `[wecom]` settings: the intelligent bot's BotID and Secret (long connection) or its
//! callback Token and EncodingAESKey (callback URL), where cards go, who may answer.

use serde::{Deserialize, Serialize};

use crate::settings::{PathClaim, Secret};

pub use crate::present::render::Locale;

/// How WeCom and imrelay talk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The bot's long connection (`aibot_subscribe`): cards are sent unprompted, clicks
    /// arrive on it; no public URL needed.
    Longconn,
    /// WeCom POSTs encrypted callbacks to `callback_path` on this server's public URL; cards
    /// can only be sent as the reply to a person's message (see docs/wecom.md).
    Callback,
}

impl Transport {
    /// The lowercase label used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Longconn => "longconn",
            Transport::Callback => "callback",
        }
    }
}

/// `[wecom]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct WeComSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// How WeCom and imrelay talk.
    pub transport: Transport,
    /// The long connection's URL (a test server, a proxy). Empty: WeCom's.
    #[serde(rename = "api_url", alias = "url")]
    pub url: String,
    /// The bot's BotID (long connection; in callback mode, the receiver id its messages name).
    pub bot_id: String,
    /// The bot's Secret (long connection).
    pub secret: Secret,
    /// The callback Token (callback mode): signs every callback.
    pub token: Secret,
    /// The callback EncodingAESKey (callback mode): 43 characters, encrypts every callback.
    pub encoding_aes_key: Secret,
    /// Callback mode: the path WeCom's callbacks are POSTed to.
    #[serde(rename = "inbound_path", alias = "callback_path")]
    pub callback_path: String,
    /// Chats cards go to: a group's chatid, or a person's userid for their one-to-one chat
    /// with the bot. WeCom delivers only to chats where someone has messaged the bot.
    #[serde(deserialize_with = "crate::settings::list")]
    pub chats: Vec<String>,
    /// WeCom userids who may answer. Empty: nobody.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// The language of card text.
    pub locale: Locale,
    /// Digests: more than this many interactions pending for one place, further ones are
    /// shown in one digest message per agent session. 0: only when the place's queue
    /// cannot be posted before the requests' deadlines.
    pub digest_after: u32,
}

impl Default for WeComSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            transport: Transport::Longconn,
            url: String::new(),
            bot_id: String::new(),
            secret: Secret::new(""),
            token: Secret::new(""),
            encoding_aes_key: Secret::new(""),
            callback_path: "/wecom/callback".into(),
            chats: Vec::new(),
            approvers: Vec::new(),
            locale: Locale::ZhCn,
            digest_after: 0,
        }
    }
}

impl WeComSettings {
    /// The paths on this server the channel serves: its callback path, when enabled in
    /// callback mode.
    pub fn paths(&self) -> Vec<PathClaim> {
        if self.enabled && self.transport == Transport::Callback {
            vec![PathClaim::new("wecom.inbound_path", &self.callback_path)]
        } else {
            Vec::new()
        }
    }

    /// The long connection's URL.
    pub fn ws_url(&self) -> String {
        match self.url.trim() {
            "" => super::bot::DEFAULT_URL.to_string(),
            url => url.to_string(),
        }
    }

    /// Whether `userid` is on the approver list.
    pub fn is_approver(&self, userid: &str) -> bool {
        !userid.is_empty() && self.approvers.iter().any(|a| a == userid)
    }

    /// Checks values that only make sense together; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "wecom.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        let url = self.url.trim();
        if !(url.is_empty() || url.starts_with("ws://") || url.starts_with("wss://")) {
            return Err(format!(
                "wecom.api_url must start with wss:// (or ws:// for a local test server) (got {url:?})"
            ));
        }
        let path = &self.callback_path;
        if !path.starts_with('/') || path.len() < 2 || path.contains(char::is_whitespace) {
            return Err(format!(
                "wecom.inbound_path must be a path such as \"/wecom/callback\" (got {path:?})"
            ));
        }
        if crate::wire::is_own_path(path) {
            return Err(format!(
                "wecom.inbound_path {path:?} collides with one of imrelay's own endpoints"
            ));
        }
        for (i, c) in self.chats.iter().enumerate() {
            if c.trim().is_empty() {
                return Err(format!("wecom.chats[{i}] must not be empty"));
            }
            if self.chats[..i].contains(c) {
                return Err(format!("wecom.chats lists {c:?} twice"));
            }
        }
        if self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err("wecom.approvers must not contain empty ids".into());
        }
        if !self.enabled {
            return Ok(());
        }
        self.validate_credentials()
    }

    fn validate_credentials(&self) -> Result<(), String> {
        let mut missing = Vec::new();
        match self.transport {
            Transport::Longconn => {
                if self.bot_id.trim().is_empty() {
                    missing.push("wecom.bot_id");
                }
                if self.secret.is_empty() {
                    missing.push("wecom.secret");
                }
            }
            Transport::Callback => {
                if self.token.is_empty() {
                    missing.push("wecom.token (required for transport = \"callback\")");
                }
                if self.encoding_aes_key.is_empty() {
                    missing.push("wecom.encoding_aes_key (required for transport = \"callback\")");
                }
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "wecom is enabled but these are not set: {}",
                missing.join(", ")
            ));
        }
        if self.transport == Transport::Callback
            && super::crypto::MsgCrypt::new(self.token.clone(), &self.encoding_aes_key, "").is_err()
        {
            return Err(
                "wecom.encoding_aes_key must be the 43 characters the bot's callback settings show"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> WeComSettings {
        WeComSettings {
            enabled: true,
            bot_id: "aib1".into(),
            secret: Secret::new("s"),
            chats: vec!["wrkSFfCgAA1".into()],
            approvers: vec!["lisi".into()],
            ..WeComSettings::default()
        }
    }

    #[test]
    fn combinations_are_checked() {
        assert!(enabled().validate().is_ok());
        assert!(WeComSettings::default().validate().is_ok());
        let mut s = enabled();
        s.secret = Secret::new("");
        assert!(s.validate().unwrap_err().contains("wecom.secret"));
        let mut s = enabled();
        s.transport = Transport::Callback;
        assert!(s.validate().unwrap_err().contains("wecom.token"));
        s.token = Secret::new("t");
        s.encoding_aes_key = Secret::new("short");
        assert!(s.validate().unwrap_err().contains("43"));
        s.encoding_aes_key = Secret::new("jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C");
        assert!(s.validate().is_ok());
        assert_eq!(s.paths().len(), 1);
        let mut s = enabled();
        s.chats.push(s.chats[0].clone());
        assert!(s.validate().unwrap_err().contains("twice"));
        let mut s = enabled();
        // No chats: accepted, so a group's chatid can be learnt by @-mentioning the bot.
        s.chats.clear();
        assert!(s.validate().is_ok());
        assert!(
            crate::channels::Channel::warnings(&s)
                .concat()
                .contains("wecom: a message from a chat not in wecom.chats")
        );
        let mut s = enabled();
        s.url = "http://x".into();
        assert!(s.validate().unwrap_err().contains("wecom.api_url"));
        let mut s = enabled();
        s.callback_path = "/v1/interactions".into();
        assert!(s.validate().unwrap_err().contains("collides"));
        assert_eq!(enabled().ws_url(), crate::channels::wecom::bot::DEFAULT_URL);
    }
}
