//! What an interaction carries of its route and its quorum, stamped on it at creation so
//! every process agrees on them: the route's name, places ([`Target`]), approvers and
//! [`Escalation`] ([`RouteStamp`]), the [`Quorum`] and the [`Vote`]s so far. The routes and
//! the two-person rule (`interaction::routes`, `interaction::quorum`) decide them; this file
//! only holds them, so the model imports neither.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{Interaction, Via, millis};

/// The implicit last route's name.
pub const DEFAULT_ROUTE: &str = "default";

/// A place a route sends its interactions: a channel's name (`telegram`, `feishu`, `slack`,
/// `webhook`) and the address that channel reads (a chat id, `type:id` receiver, a
/// conversation id, a webhook's name).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Target {
    /// The channel's name.
    pub channel: String,
    /// The address on it.
    pub to: String,
}

impl Target {
    /// A target on `channel`.
    pub fn new(channel: impl Into<String>, to: impl Into<String>) -> Self {
        Self {
            channel: channel.into(),
            to: to.into(),
        }
    }
}

/// The route an interaction took, as it is stored with it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStamp {
    /// The route's name.
    pub name: String,
    /// Where it was sent; `None`: everywhere (the implicit last route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<Target>>,
    /// The people and groups who may answer it; empty: the channels' approver lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Where it goes, and who may answer it too, when nobody answered in time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
    /// An answer counts only with a passkey assertion made in the inbox (`step_up`): chat
    /// buttons, webhooks and API answers without one are refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub step_up: bool,
    /// "Desk first": while one of its approvers is at the inbox or `imrelay watch`, the
    /// phone copies (push, ntfy, direct messages; chat copies too with `desk_first_chats`)
    /// wait this many seconds, never past the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desk_first_secs: Option<u64>,
    /// With `desk_first_secs`: the chat copies (groups, channels) wait too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub desk_first_chats: bool,
}

impl RouteStamp {
    /// The implicit last route's stamp.
    pub fn default_route() -> Self {
        Self {
            name: DEFAULT_ROUTE.into(),
            targets: None,
            approvers: Vec::new(),
            escalation: None,
            step_up: false,
            desk_first_secs: None,
            desk_first_chats: false,
        }
    }

    /// The addresses on `channel` this interaction goes to: `None` when it goes to every
    /// place the channel is configured with.
    pub fn addresses<'a>(&'a self, channel: &'a str) -> Option<impl Iterator<Item = &'a str>> {
        self.targets.as_ref().map(move |t| {
            t.iter()
                .filter(move |t| t.channel == channel)
                .map(|t| t.to.as_str())
        })
    }
}

impl RouteStamp {
    /// The addresses on `channel` its escalation posts to, leaving out those the route posted
    /// to already (their copies are live): empty when it does not escalate.
    pub fn escalation_addresses<'a>(&'a self, channel: &'a str) -> Vec<&'a str> {
        let Some(e) = &self.escalation else {
            return Vec::new();
        };
        let posted: Vec<&str> = self
            .addresses(channel)
            .map(Iterator::collect)
            .unwrap_or_default();
        e.addresses(channel)
            .filter(|a| !posted.contains(a))
            .collect()
    }
}

/// The name of `i`'s route: the implicit last route's when it carries none.
pub fn route_name(i: &Interaction) -> &str {
    i.route
        .as_deref()
        .map_or(DEFAULT_ROUTE, |r| r.name.as_str())
}

/// A route's escalation: after `after_secs` unanswered, its interactions are posted to
/// `targets` as well (the first copies stay live), and `approvers` may answer them too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// Seconds after creation.
    pub after_secs: u64,
    /// The places it is posted to then (already resolved to addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<Target>,
    /// The people and groups who may answer from then on, besides the route's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// Whether its notifications reach phones in their people's quiet hours.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub through_quiet: bool,
}

impl Escalation {
    /// When interaction `i` escalates: `after_secs` after its creation.
    pub fn due(&self, i: &Interaction) -> jiff::Timestamp {
        i64::try_from(self.after_secs)
            .ok()
            .and_then(|s| {
                i.created_at
                    .checked_add(jiff::SignedDuration::from_secs(s))
                    .ok()
            })
            .unwrap_or(jiff::Timestamp::MAX)
    }

    /// The addresses on `channel` it is posted to.
    pub fn addresses<'a>(&'a self, channel: &'a str) -> impl Iterator<Item = &'a str> {
        self.targets
            .iter()
            .filter(move |t| t.channel == channel)
            .map(|t| t.to.as_str())
    }

    /// The wait as people read it: `5 min`, `90 s`, `2 h`, `1 h 30 min`.
    pub fn wait_text(&self) -> String {
        let s = self.after_secs;
        match (s / 3600, s % 3600 / 60, s % 60) {
            (0, 0, s) => format!("{s} s"),
            (0, m, 0) => format!("{m} min"),
            (h, 0, 0) => format!("{h} h"),
            (h, m, 0) if h > 0 => format!("{h} h {m} min"),
            _ => format!("{s} s"),
        }
    }
}

/// How many different people decide an approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quorum {
    /// Different people who must allow it (at least 2 for a quorum to mean anything).
    pub allow: u32,
    /// Different people whose deny denies it (1: one deny denies).
    #[serde(default = "one")]
    pub deny: u32,
}

fn one() -> u32 {
    1
}

impl Quorum {
    /// The quorum of a route or rule configured with `allow` and `deny` (`None`: none, or
    /// one person, which is no quorum at all).
    pub fn of(allow: Option<u32>, deny: Option<u32>) -> Option<Self> {
        let allow = allow.filter(|a| *a > 1)?;
        Some(Self {
            allow,
            deny: deny.unwrap_or(1).clamp(1, allow),
        })
    }

    /// The stricter of two quorums: the larger allow count, the smaller deny count.
    pub fn stricter(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Self {
                allow: a.allow.max(b.allow),
                deny: a.deny.min(b.deny),
            }),
            (a, b) => a.or(b),
        }
    }

    /// How many votes on `allow`'s side decide.
    pub fn needed(&self, allow: bool) -> u32 {
        if allow { self.allow } else { self.deny }
    }
}

/// One person's vote on an approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// Who, as a person: a configured person's name, or `channel:id` for an identity nobody
    /// configured. One vote per person.
    pub person: String,
    /// The name shown ("alice").
    pub by: String,
    /// The channel it came through.
    pub via: Via,
    /// Allow (`true`) or deny.
    pub allow: bool,
    /// When.
    #[serde(serialize_with = "millis")]
    pub at: Timestamp,
}
