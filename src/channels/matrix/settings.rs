//! `[matrix]` settings: the homeserver and the bot's credentials (an access token, or a user
//! and password to log in with), the rooms prompts go to, who may answer, the language of
//! what people are told, and the timeouts of the `/sync` long poll.

use serde::{Deserialize, Serialize};

use crate::channels::threads::ThreadPer;
use crate::present::render::Locale;
use crate::settings::Secret;

/// How answers reach imrelay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// imrelay long-polls the homeserver's `/sync`: no public URL needed.
    Sync,
}

impl Transport {
    /// The lowercase label used in settings and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Sync => "sync",
        }
    }
}

/// `[matrix]`
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MatrixSettings {
    /// Whether the channel runs.
    pub enabled: bool,
    /// How answers arrive (`sync`).
    pub transport: Transport,
    /// The homeserver's client-server API base URL (`https://matrix.example.org`).
    pub api_url: String,
    /// The bot account's access token. Empty: log in with `user` and `password`.
    pub access_token: Secret,
    /// The bot account's user id (`@imrelay:example.org`) or localpart, to log in with
    /// `password` when no access token is set.
    pub user: String,
    /// The bot account's password (only with `user`).
    pub password: Secret,
    /// Room ids (`!abc123:example.org`) prompts are posted to; the bot must be invited.
    #[serde(deserialize_with = "crate::settings::list")]
    pub chats: Vec<String>,
    /// Matrix user ids (`@alice:example.org`) who may answer. Empty: only `[[people]]` a
    /// route names.
    #[serde(deserialize_with = "crate::settings::list")]
    pub approvers: Vec<String>,
    /// The language of the notices imrelay answers with (`en_us` or `zh_cn`).
    pub locale: Locale,
    /// How long connecting to the homeserver may take, seconds.
    pub connect_timeout_secs: u64,
    /// How long one `/sync` long poll waits for news at the homeserver, seconds.
    pub sync_timeout_secs: u64,
    /// How long any other request may take, seconds.
    pub timeout_secs: u64,
    /// Where each agent session's prompts go: `none` (in the room) or `session` (a thread
    /// per session, under a first message that names it).
    pub thread_per: ThreadPer,
    /// Whether the outcome is also posted as a reply to each message.
    pub thread_replies: bool,
    /// More than this many pending for one room: one digest message per agent session
    /// instead of a message each (0: only for a burst the room cannot be posted to in time).
    pub digest_after: u32,
}

impl Default for MatrixSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            transport: Transport::Sync,
            api_url: String::new(),
            access_token: Secret::new(""),
            user: String::new(),
            password: Secret::new(""),
            chats: Vec::new(),
            approvers: Vec::new(),
            locale: Locale::EnUs,
            connect_timeout_secs: 10,
            sync_timeout_secs: 30,
            timeout_secs: 15,
            thread_per: ThreadPer::None,
            thread_replies: false,
            digest_after: 0,
        }
    }
}

/// Why `id` is not a Matrix user id (`@localpart:server`), with the fix; `None` when it is.
pub(crate) fn not_a_user_id(id: &str) -> Option<String> {
    if ruma::UserId::parse(id).is_ok() {
        return None;
    }
    Some(if id.starts_with('@') {
        format!(
            "{id:?} is not a Matrix user id: write it as @localpart:server, like \"@alice:example.org\""
        )
    } else {
        format!(
            "{id:?} is not a Matrix user id: write the whole id, like \"@{}:example.org\" \
             (Element shows it under the person's name)",
            id.trim_start_matches('@')
        )
    })
}

/// Why `room` is not a room id (`!opaque:server`), with the fix; `None` when it is.
pub(crate) fn not_a_room_id(room: &str) -> Option<String> {
    if ruma::RoomId::parse(room).is_ok() {
        return None;
    }
    Some(if room.starts_with('#') {
        format!(
            "{room:?} is a room alias, not a room id: use the id (\"!...:server\"; Element: \
             Room settings → Advanced → Internal room ID)"
        )
    } else {
        format!(
            "{room:?} is not a Matrix room id: room ids look like \"!abc123:example.org\" \
             (Element: Room settings → Advanced → Internal room ID)"
        )
    })
}

impl MatrixSettings {
    /// The homeserver's base URL, without a trailing slash.
    pub fn base(&self) -> &str {
        self.api_url.trim().trim_end_matches('/')
    }

    /// Whether Matrix user `id` is on `approvers`.
    pub fn is_approver(&self, id: &str) -> bool {
        !id.is_empty() && self.approvers.iter().any(|a| a == id)
    }

    /// Every mistake in the section, each naming the setting and its fix.
    pub fn mistakes(&self) -> Vec<String> {
        let mut out = Vec::new();
        let url = self.api_url.trim();
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            out.push(format!(
                "matrix.api_url = {url:?} must start with https:// or http://: the homeserver, \
                 like \"https://matrix.example.org\""
            ));
        }
        for (what, v, max) in [
            (
                "matrix.connect_timeout_secs",
                self.connect_timeout_secs,
                300,
            ),
            ("matrix.sync_timeout_secs", self.sync_timeout_secs, 300),
            ("matrix.timeout_secs", self.timeout_secs, 300),
        ] {
            if !(1..=max).contains(&v) {
                out.push(format!("{what} must be between 1 and {max} (got {v})"));
            }
        }
        if self.digest_after > crate::channels::digest::MAX_AFTER {
            out.push(format!(
                "matrix.digest_after is {}: give 0 (no digests past a count) or at most {}",
                self.digest_after,
                crate::channels::digest::MAX_AFTER
            ));
        }
        for (j, c) in self.chats.iter().enumerate() {
            if self.chats[..j].contains(c) {
                out.push(format!("matrix.chats lists {c:?} twice"));
            }
        }
        if !self.enabled {
            return out;
        }
        if url.is_empty() {
            out.push(
                "matrix.api_url is empty: set the homeserver's address, like \
                 \"https://matrix.example.org\""
                    .into(),
            );
        }
        let token = !self.access_token.is_empty();
        let login = !self.user.trim().is_empty() || !self.password.is_empty();
        match (token, login) {
            (false, false) => out.push(
                "matrix is enabled but has no credentials: set matrix.access_token (the bot \
                 account's), or matrix.user and matrix.password to log in with"
                    .into(),
            ),
            (true, true) => out.push(
                "matrix: both access_token and user/password are set: use one (the token, or \
                 the login)"
                    .into(),
            ),
            (false, true) if self.user.trim().is_empty() || self.password.is_empty() => {
                out.push("matrix: logging in needs both matrix.user and matrix.password".into())
            }
            _ => {}
        }
        out
    }

    /// The ids on `chats` and `approvers` that can never work (a name, an alias), each said
    /// with its fix.
    pub fn wrong_ids(&self) -> Vec<String> {
        let chats =
            self.chats.iter().enumerate().filter_map(|(j, c)| {
                not_a_room_id(c).map(|why| format!("matrix.chats[{j}]: {why}"))
            });
        let approvers = self.approvers.iter().enumerate().filter_map(|(j, a)| {
            not_a_user_id(a).map(|why| format!("matrix.approvers[{j}]: {why}"))
        });
        chats.chain(approvers).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mistake_is_said_with_its_setting() {
        let s = MatrixSettings {
            enabled: true,
            api_url: "matrix.org".into(),
            sync_timeout_secs: 0,
            chats: vec!["!a:x".into(), "!a:x".into()],
            user: "bot".into(),
            ..MatrixSettings::default()
        };
        let m = s.mistakes().join("\n");
        for needle in [
            "matrix.api_url",
            "matrix.sync_timeout_secs",
            "twice",
            "matrix.user and matrix.password",
        ] {
            assert!(m.contains(needle), "{needle} missing from {m}");
        }
        assert!(MatrixSettings::default().mistakes().is_empty());
        let none = MatrixSettings {
            enabled: true,
            api_url: "https://m.example.org".into(),
            ..MatrixSettings::default()
        };
        assert!(none.mistakes()[0].contains("no credentials"));
    }

    #[test]
    fn it_starts_with_no_rooms_yet() {
        let s = MatrixSettings {
            enabled: true,
            api_url: "https://m.example.org".into(),
            access_token: Secret::new("syt_x"),
            ..MatrixSettings::default()
        };
        assert!(s.mistakes().is_empty(), "{:?}", s.mistakes());
        assert!(s.wrong_ids().is_empty());
    }

    #[test]
    fn names_and_aliases_are_refused_where_ids_belong() {
        let s = MatrixSettings {
            chats: vec!["#ops:example.org".into(), "!ok:example.org".into()],
            approvers: vec!["alice".into(), "@bob:example.org".into()],
            ..MatrixSettings::default()
        };
        let wrong = s.wrong_ids();
        assert_eq!(wrong.len(), 2, "{wrong:?}");
        assert!(wrong[0].contains("room alias"), "{}", wrong[0]);
        assert!(wrong[1].contains("@alice:example.org"), "{}", wrong[1]);
    }

    #[test]
    fn secrets_never_show() {
        let s = MatrixSettings {
            access_token: Secret::new("syt_secret"),
            password: Secret::new("hunter2"),
            ..MatrixSettings::default()
        };
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("syt_secret") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
