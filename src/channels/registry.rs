//! The channel registry: what every channel offers the rest of imrelay, so that the settings
//! checks, start-up and `imrelay doctor` go over one list instead of naming each channel.
//!
//! Each channel's settings section implements [`Channel`] in the channel's `mod.rs`; the list
//! itself is `each_channel!` in `channels/mod.rs`, from which the settings tree (which owns the
//! sections) makes `config::Settings::channels`. Configuration
//! validates each in turn, gathers their path claims and warnings; `app` installs each;
//! `imrelay doctor` runs each one's [`Channel::doctor`] checks.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use anyhow::Context;

use crate::settings::PathClaim;
use crate::store::Store;

use super::Wiring;

/// A future a channel hands back through the registry.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An id or a place as written in `[[people]]` and `[[routes]]` (`telegram = [42]`,
/// `slack = ["C0123"]`): a number or a text, each channel saying which it takes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(untagged)]
pub enum Written {
    /// A number (Telegram's user and chat ids).
    Number(i64),
    /// A text (every other channel's ids and places).
    Text(String),
}

impl From<i64> for Written {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<i32> for Written {
    fn from(n: i32) -> Self {
        Self::Number(n.into())
    }
}

impl From<u64> for Written {
    fn from(n: u64) -> Self {
        Self::Number(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<&str> for Written {
    fn from(s: &str) -> Self {
        Self::Text(s.to_string())
    }
}

impl From<String> for Written {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Text(t) => write!(f, "{t:?}"),
        }
    }
}

impl Written {
    /// As a text id: a text as it is, a number refused (`what` names what was expected).
    pub fn text(&self, what: &str) -> Result<String, String> {
        match self {
            Self::Text(t) => Ok(t.clone()),
            Self::Number(n) => Err(format!("{n} is a number, but {what} is a text: quote it")),
        }
    }

    /// As a number: a number as it is (at least `min`), a text refused.
    pub fn number(&self, what: &str, min: i64) -> Result<String, String> {
        match self {
            Self::Number(n) if *n >= min => Ok(n.to_string()),
            Self::Number(n) => Err(format!("{n} is not {what}")),
            Self::Text(t) => Err(format!(
                "{t:?} is a text, but {what} is a number: unquote it"
            )),
        }
    }
}

/// One channel, as configuration, start-up and `imrelay doctor` see it: implemented by the
/// channel's settings section. It is the channel's whole contract with the rest of imrelay:
/// its name, its places, how a person's id on it is written, where a person is messaged
/// directly, its checks, its install and its doctor.
pub trait Channel: Send + Sync {
    /// Its name: in people's ids, in routes' targets, in log lines and in its section's name.
    fn name(&self) -> &'static str;

    /// The platform as people call it, in help texts and lists of channels ("Telegram",
    /// "Feishu/Lark", "webhooks"). Every user-facing list of channels is checked against
    /// these by a test.
    fn platform(&self) -> &'static str;

    /// The key `[[routes]]` and `escalate_to` list its places under (its name, unless said).
    fn route_key(&self) -> &'static str {
        self.name()
    }

    /// The key `[[people]]` lists a person's ids on it under (its name, unless said).
    fn person_key(&self) -> &'static str {
        self.name()
    }

    /// Whether people answer on it by tapping its messages (a chat), so a route's approvers
    /// need an id there.
    fn is_chat(&self) -> bool {
        true
    }

    /// Whether its copies ring a person's phone by themselves (push, ntfy): "desk first"
    /// holds them while one of a route's approvers is at the desk.
    fn is_phone(&self) -> bool {
        false
    }

    /// The places it is configured to post to, as addresses a route names
    /// (`telegram.chats`, `slack.chats`, ...).
    fn places(&self) -> Vec<String> {
        Vec::new()
    }

    /// A place as a route writes it, as its address; the error says what is expected.
    fn place(&self, written: &Written) -> Result<String, String> {
        written.text("a place")
    }

    /// What a route naming `place`, not among [`Channel::places`], is told (with the fix).
    fn unlisted(&self, place: &str) -> String {
        format!("{place:?} is not in {}.chats", self.name())
    }

    /// A person's id as `[[people]]` writes it, as answers on it name them; the error says
    /// what is expected.
    fn person_id(&self, written: &Written) -> Result<String, String> {
        written.text("an id")
    }

    /// Where a person whose id here is `id` is messaged directly (`None`: it cannot).
    fn direct(&self, id: &str) -> Option<String> {
        Some(id.to_string())
    }

    /// Whether it is set up to run (for the webhook channel: any target configured).
    fn enabled(&self) -> bool;

    /// Checks its section's values; the message names the setting and the fix.
    fn validate(&self) -> Result<(), String>;

    /// The server paths its inbound endpoints claim (checked against every other claim).
    fn paths(&self) -> Vec<PathClaim> {
        Vec::new()
    }

    /// A chat channel's words, from which the kit opens its install and says its warnings
    /// (`None`: not a chat channel on the kit).
    fn chat(&self) -> Option<&'static Chat> {
        None
    }

    /// Valid settings that are probably not what was meant (besides
    /// [`Channel::nobody_answers`]); a chat channel's default: that it has no places.
    fn warnings(&self) -> Vec<String> {
        no_places(self).into_iter().collect()
    }

    /// The people on its own approver list, by their ids on it (who may answer a route that
    /// names no approvers).
    fn approvers(&self) -> Vec<String> {
        Vec::new()
    }

    /// Values of its section that read but can never work (a name where an id belongs),
    /// each a complete message with its fix; all are said at once with the others'.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }

    /// What a chat channel's start-up logs as an error when nobody is on its own approver
    /// list, when it says more than the kit's line (which names the ids to add): Telegram's
    /// also says whether prompts are posted at all, Matrix's that a route's people still may.
    fn unanswerable(&self) -> Option<&'static str> {
        None
    }

    /// When it is enabled with nobody on its own approver list: the warning that it posts
    /// prompts nobody may answer. Shown unless a route's approvers have ids on it. A chat
    /// channel's default says it in its [`Chat`] words.
    fn nobody_answers(&self) -> Option<String> {
        let chat = self.chat()?;
        let (name, platform) = (self.name(), self.platform());
        (self.enabled() && self.approvers().is_empty()).then(|| {
            format!(
                "{name} is enabled but {name}.approvers is empty: {}, but nobody can answer \
                 them from {platform} ({})",
                chat.posts, chat.refused
            )
        })
    }

    /// Plugs it in (a disabled channel does nothing): its lifecycle hook, its delivery
    /// handler, its routes and its tasks.
    fn install<'a>(&'a self, wiring: &'a mut Wiring) -> BoxFuture<'a, anyhow::Result<()>>;

    /// `imrelay doctor`'s checks of it (called only when [`Channel::enabled`]).
    fn doctor<'a>(&'a self, run: &'a Doctor) -> BoxFuture<'a, Vec<Check>>;
}

/// What the kit says of a chat channel: the words of its install's opening and of its
/// warnings, so that every chat channel says them alike (see [`Channel::chat`]).
#[derive(Debug)]
pub struct Chat {
    /// What identifies an approver there ("Slack user ids (U...)").
    pub approver_ids: &'static str,
    /// The store secret that signs its buttons (kept across restarts, so old messages keep
    /// working); empty: it signs nothing, and has none.
    pub secret: &'static str,
    /// What that secret signs, as an error names it ("button", "card").
    pub signs: &'static str,
    /// What it does with a prompt, as a warning says it ("messages are posted").
    pub posts: &'static str,
    /// What becomes of a refused answer there ("a refused click logs the clicker's user id").
    pub refused: &'static str,
    /// With no places of its own: what reaches only the people a route messages directly
    /// ("prompts", "cards") and how to add a place; `None`: not warned of (an empty list is
    /// how its ids are learnt).
    pub no_places: Option<(&'static str, &'static str)>,
}

impl Chat {
    /// The steps every chat channel's install begins with: its section validated, an error
    /// logged when nobody may answer from it, and its button secret loaded from the store.
    pub(crate) async fn open(
        &'static self,
        store: &dyn Store,
        section: &dyn Channel,
    ) -> anyhow::Result<Vec<u8>> {
        Opening {
            channel: section.name(),
            platform: section.platform(),
            approver_ids: self.approver_ids,
            secret: self.secret,
            signs: self.signs,
        }
        .open(store, section, section.approvers().len())
        .await
    }
}

/// A chat channel's warning that it has no places of its own, in its [`Chat`] words.
pub(crate) fn no_places<C: Channel + ?Sized>(c: &C) -> Option<String> {
    let (what, how) = c.chat()?.no_places?;
    (c.enabled() && c.places().is_empty()).then(|| {
        format!(
            "{}.chats is empty: {what} reach only people a route messages directly \
             (`direct`); {how}",
            c.name()
        )
    })
}

/// What `imrelay doctor` asks of a channel's checks.
#[derive(Clone)]
pub struct Doctor {
    /// Whether to send a test message to every destination (`--send-test`).
    pub send_test: bool,
    /// `server.public_url` as configured (possibly empty), for test events that carry it.
    pub public_url: String,
    /// What the store keeps for channels, read without changing it; `None` when the store
    /// keeps nothing across starts (memory) or cannot be read.
    pub kept: Option<std::sync::Arc<dyn Kept>>,
}

impl fmt::Debug for Doctor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doctor")
            .field("send_test", &self.send_test)
            .field("public_url", &self.public_url)
            .field("kept", &self.kept.is_some())
            .finish()
    }
}

/// A channel's state in the store as `imrelay doctor` reads it: without writing, beside a
/// running server or before the first start.
pub trait Kept: Send + Sync {
    /// The named values whose keys start with `prefix`, at most `limit`.
    fn values_under<'a>(
        &'a self,
        prefix: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<(String, String)>, crate::store::StoreError>>;
    /// The named server secret `name`, if it was made (`None`: not yet).
    fn secret<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, crate::store::StoreError>>;
}

impl Doctor {
    /// With `--send-test`, a failure for each destination of `channel` that gets no test
    /// message because a check before it failed: every destination has its line.
    pub fn untried(
        &self,
        channel: &str,
        destinations: impl IntoIterator<Item = String>,
        checks: &mut Vec<Check>,
    ) {
        if !self.send_test {
            return;
        }
        for to in destinations {
            checks.push(Check::fail(
                format!("{channel}: no test message sent to {to}, as the check above failed"),
                "fix that, then run `imrelay doctor --send-test` again",
            ));
        }
    }
}

/// The outcome of one `imrelay doctor` check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    /// Whether it passed.
    pub ok: bool,
    /// What was checked, and what was found.
    pub what: String,
    /// What to do about a failure.
    pub fix: Option<String>,
}

impl Check {
    /// A check that passed.
    pub fn pass(what: impl Into<String>) -> Self {
        Self {
            ok: true,
            what: what.into(),
            fix: None,
        }
    }

    /// A check that failed, with what to do about it.
    pub fn fail(what: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            ok: false,
            what: what.into(),
            fix: Some(fix.into()),
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.ok { "✓" } else { "✗" };
        write!(f, "{mark} {}", self.what)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n    → {fix}")?;
        }
        Ok(())
    }
}

/// The platforms of `channels` as a sentence lists them: "Telegram, Slack and webhooks".
pub fn in_words(channels: &[&dyn Channel]) -> String {
    let names: Vec<&str> = channels.iter().map(|c| c.platform()).collect();
    match names.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Installs every channel of `channels`, in order.
pub async fn install(wiring: &mut Wiring, channels: &[&dyn Channel]) -> anyhow::Result<()> {
    for channel in channels {
        channel.install(wiring).await?;
    }
    // After every channel's hook: "desk first" holds the copies they planned.
    let on = || channels.iter().filter(|c| c.enabled());
    let chats = || on().filter(|c| c.is_chat() && !c.is_phone());
    let teams = wiring.registry.teams();
    let mut direct = std::collections::HashMap::new();
    for c in chats() {
        for p in teams.people.people() {
            for to in p.ids_on(c.name()).filter_map(|id| c.direct(id)) {
                direct.insert((c.name(), to), p.name().to_string());
            }
        }
    }
    wiring
        .registry
        .add_hook(std::sync::Arc::new(super::desk::DeskFirst {
            phones: on().filter(|c| c.is_phone()).map(|c| c.name()).collect(),
            chats: chats().map(|c| c.name()).collect(),
            direct,
            registry: wiring.registry.clone(),
        }));
    Ok(())
}

/// How a chat platform's install begins: whom it warns about, and the store secret that signs
/// its buttons.
pub(crate) struct Opening {
    /// The channel's name: its log lines' prefix and its section's name.
    pub channel: &'static str,
    /// The platform as people call it ("Slack").
    pub platform: &'static str,
    /// What identifies an approver there ("Slack user ids (U...)").
    pub approver_ids: &'static str,
    /// The store secret that signs its buttons (kept across restarts, so old messages keep
    /// working).
    pub secret: &'static str,
    /// What that secret signs, as an error names it ("button", "card").
    pub signs: &'static str,
}

impl Opening {
    /// The steps every chat platform's install begins with: its section validated, an error
    /// logged when nobody (`approvers` is 0) may answer from it, and its button secret loaded
    /// from the store.
    pub(crate) async fn open(
        &self,
        store: &dyn Store,
        section: &dyn Channel,
        approvers: usize,
    ) -> anyhow::Result<Vec<u8>> {
        let Self {
            channel,
            platform,
            approver_ids,
            secret,
            signs,
        } = self;
        section
            .validate()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
        if approvers == 0 {
            match section.unanswerable() {
                Some(line) => tracing::error!("{channel}: {line}"),
                None => tracing::error!(
                    "{channel}: {channel}.approvers is EMPTY, so NOBODY can answer from {platform}: every click will be refused. \
                     Add the {approver_ids} of the people who may approve."
                ),
            }
        }
        // A channel that signs nothing (Matrix: the homeserver says who reacted) has none.
        if secret.is_empty() {
            return Ok(Vec::new());
        }
        store
            .secret(secret)
            .await
            .with_context(|| format!("cannot load the {channel} {signs} secret from the store"))
    }
}
