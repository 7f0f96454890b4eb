//! `[dingtalk]` settings: the app's credentials (its Client ID / AppKey and Client Secret),
//! the card template prompts are drawn with, the group conversations they go to, who may
//! answer, and where the OpenAPI and the Stream gateway are.

use serde::{Deserialize, Serialize};

use super::stream::DEFAULT_API_BASE;
use crate::settings::{PathClaim, Secret};

/// The language of card text.
pub use crate::present::render::Locale;

/// The prefix of a target that is a person's direct chat with the bot, not a group.
pub const USER_PREFIX: &str = "user:";

/// `[dingtalk]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct DingTalkSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// The app's Client ID (its AppKey, `ding...`).
    pub client_id: String,
    /// The app's Client Secret (its AppSecret).
    pub client_secret: Secret,
    /// The robot that delivers cards to groups (its robotCode). Empty: the Client ID, which
    /// is the robot code of an app's own robot.
    pub robot_code: String,
    /// The id of the card template built in DingTalk's card builder (`....schema`), with
    /// the variables and actions docs/dingtalk.md lists.
    pub card_template_id: String,
    /// Group conversations cards are sent to (their openConversationId, `cid...`).
    #[serde(deserialize_with = "crate::settings::list")]
    #[serde(rename = "chats", alias = "conversations")]
    pub conversations: Vec<String>,
    /// DingTalk userIds who may answer. Empty: nobody.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// The language of card text.
    pub locale: Locale,
    /// Overrides the OpenAPI base URL (a proxy, or a test server). Empty: DingTalk's.
    #[serde(rename = "api_url", alias = "api_base")]
    pub api_base: String,
    /// Overrides the base URL of the Stream gateway (`/v1.0/gateway/connections/open`).
    /// Empty: the OpenAPI base.
    #[serde(rename = "gateway_url", alias = "gateway_base")]
    pub gateway_base: String,
    /// How long opening the Stream connection may take before it is abandoned and
    /// retried, seconds.
    pub connect_timeout_secs: u64,
    /// Digests: more than this many interactions pending for one place, further ones are
    /// shown in one digest message per agent session. 0: only when the place's queue
    /// cannot be posted before the requests' deadlines.
    pub digest_after: u32,
}

impl Default for DingTalkSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            client_id: String::new(),
            client_secret: Secret::new(""),
            robot_code: String::new(),
            card_template_id: String::new(),
            conversations: Vec::new(),
            approvers: Vec::new(),
            locale: Locale::ZhCn,
            api_base: String::new(),
            gateway_base: String::new(),
            connect_timeout_secs: 15,
            digest_after: 0,
        }
    }
}

fn base(url: &str, default: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    if url.is_empty() {
        default.to_string()
    } else {
        url.to_string()
    }
}

impl DingTalkSettings {
    /// The effective OpenAPI base URL, without a trailing slash.
    pub fn api_base(&self) -> String {
        base(&self.api_base, DEFAULT_API_BASE)
    }

    /// The effective Stream gateway base URL, without a trailing slash.
    pub fn gateway_base(&self) -> String {
        base(&self.gateway_base, &self.api_base())
    }

    /// The robot code cards are delivered by.
    pub fn robot_code(&self) -> &str {
        match self.robot_code.trim() {
            "" => self.client_id.trim(),
            code => code,
        }
    }

    /// The channel serves no path: clicks arrive over the Stream connection.
    pub fn paths(&self) -> Vec<PathClaim> {
        Vec::new()
    }

    /// Whether DingTalk user `id` is on the approver list.
    pub fn is_approver(&self, id: &str) -> bool {
        !id.is_empty() && self.approvers.iter().any(|a| a == id)
    }

    /// Checks values that only make sense together; the message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            return Err(format!(
                "dingtalk.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        for (name, url) in [
            ("dingtalk.api_url", &self.api_base),
            ("dingtalk.gateway_url", &self.gateway_base),
        ] {
            let url = url.trim();
            if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "{name} must start with http:// or https:// (got {url:?})"
                ));
            }
        }
        if !(1..=300).contains(&self.connect_timeout_secs) {
            return Err(format!(
                "dingtalk.connect_timeout_secs must be between 1 and 300 (got {})",
                self.connect_timeout_secs
            ));
        }
        for (i, c) in self.conversations.iter().enumerate() {
            if c.trim().is_empty() || c.starts_with(USER_PREFIX) {
                return Err(format!(
                    "dingtalk.chats[{i}] must be a group's openConversationId (cid...), got {c:?}"
                ));
            }
            if self.conversations[..i].contains(c) {
                return Err(format!("dingtalk.chats lists {c:?} twice"));
            }
        }
        if self.approvers.iter().any(|a| a.trim().is_empty()) {
            return Err("dingtalk.approvers must not contain empty ids".into());
        }
        if !self.enabled {
            return Ok(());
        }
        let mut missing = Vec::new();
        if self.client_id.trim().is_empty() {
            missing.push("dingtalk.client_id");
        }
        if self.client_secret.is_empty() {
            missing.push("dingtalk.client_secret");
        }
        if self.card_template_id.trim().is_empty() {
            missing.push("dingtalk.card_template_id");
        }
        if !missing.is_empty() {
            return Err(format!(
                "dingtalk is enabled but these are not set: {}",
                missing.join(", ")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enabled() -> DingTalkSettings {
        DingTalkSettings {
            enabled: true,
            client_id: "dingapp".into(),
            client_secret: Secret::new("s"),
            card_template_id: "tpl.schema".into(),
            conversations: vec!["cid1".into()],
            approvers: vec!["manager1".into()],
            ..DingTalkSettings::default()
        }
    }

    #[test]
    fn combinations_are_checked() {
        assert!(enabled().validate().is_ok());
        assert!(DingTalkSettings::default().validate().is_ok());
        let mut s = enabled();
        s.client_secret = Secret::new("");
        assert!(s.validate().unwrap_err().contains("dingtalk.client_secret"));
        let mut s = enabled();
        s.card_template_id.clear();
        assert!(s.validate().unwrap_err().contains("card_template_id"));
        let mut s = enabled();
        s.conversations.push("cid1".into());
        assert!(s.validate().unwrap_err().contains("twice"));
        let mut s = enabled();
        s.conversations = vec!["user:manager1".into()];
        assert!(s.validate().unwrap_err().contains("openConversationId"));
        let mut s = enabled();
        s.gateway_base = "ws://x".into();
        assert!(s.validate().unwrap_err().contains("gateway_url"));
        let mut s = enabled();
        s.connect_timeout_secs = 0;
        assert!(s.validate().is_err());
    }

    #[test]
    fn bases_and_robot_code_default_sensibly() {
        let mut s = enabled();
        assert_eq!(s.api_base(), DEFAULT_API_BASE);
        assert_eq!(s.gateway_base(), DEFAULT_API_BASE);
        assert_eq!(s.robot_code(), "dingapp");
        s.api_base = "http://127.0.0.1:9/".into();
        s.robot_code = "robot1".into();
        assert_eq!(s.gateway_base(), "http://127.0.0.1:9");
        assert_eq!(s.robot_code(), "robot1");
    }
}
