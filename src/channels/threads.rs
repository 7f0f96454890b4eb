//! One thread per agent session, and the outcome as a reply: written once for every chat
//! channel that has threads ([docs/channels.md](../../docs/channels.md#threads)).
//!
//! With `thread_per = "session"` a chat channel puts each agent session's prompts in a
//! thread of their own, per chat: the first prompt of a session in a chat opens the thread
//! (`Platform::open_thread`: a Telegram forum
//! topic, a Slack thread under a first message, a Discord thread, a Matrix thread, a Feishu
//! reply thread) with a first message that names the agent, the session and the working
//! directory (`Opener`), and every later prompt of that session goes into it
//! (`Platform::post_in_thread`). Answers need
//! nothing new: a button, a reaction or a reply in a thread names its interaction as it does
//! in the chat.
//!
//! Which thread a session has in a chat is a small named value in the store
//! (`thread:<channel>:<chat>:<session key>`, as digests keep theirs), so it survives a
//! restart and is shared by processes on one store. At most [`MAX_THREADS`] are kept per
//! channel: opening one past that closes and forgets the oldest. Threads whose session
//! ended (its agent's `SessionEnd`) are closed
//! (`Platform::close_thread`: a Telegram topic is
//! closed, a Discord thread archived and locked; Slack, Matrix and Feishu threads have
//! nothing to close) and forgotten by a sweep that runs with the channel's deliveries: at
//! the next one after the session ended in this process (`Lifecycle::session_reported`),
//! and at most every [`SWEEP_EVERY`] otherwise (a session ended through another process).
//!
//! Without a session (an interaction from the agent API that names none) a prompt is posted
//! in the chat itself. A thread the platform refuses to open for good (a Telegram group that
//! is not a forum, say) is logged and the prompt is posted in the chat.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::digest::{KeyedLocks, session_key};
use crate::interaction::Interaction;
use crate::interaction::Lifecycle;
use crate::interaction::sessions::{Session, SessionState};
use crate::present::render::{Locale, format_time, outcome_phrase_in};
use crate::present::visible_line;
use crate::store::{Store, StoreError};
use crate::sync::LockExt;

/// The most threads remembered per channel.
pub const MAX_THREADS: usize = 1024;

/// How often the threads of ended sessions are looked for.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Where a chat channel puts each agent session's prompts (`thread_per`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadPer {
    /// In the chat itself (the default).
    #[default]
    None,
    /// In a thread of their own per session and chat.
    Session,
}

impl ThreadPer {
    /// The setting's value as written.
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadPer::None => "none",
            ThreadPer::Session => "session",
        }
    }
}

/// What a session's thread starts with: which agent, session and working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Opener {
    /// The agent (`claude-code`), or `agent`.
    pub agent: String,
    /// The session's id.
    pub session: String,
    /// The working directory, when the agent said.
    pub cwd: Option<String>,
}

impl Opener {
    /// The opener of `i`'s session, if it names one.
    pub(crate) fn of(i: &Interaction) -> Option<Self> {
        let session = i.session.as_deref()?;
        Some(Opener {
            agent: visible_line(i.agent.as_deref().unwrap_or("agent")),
            session: visible_line(session),
            cwd: i.cwd.as_deref().map(visible_line),
        })
    }

    /// A short title of at most `max` characters (a Telegram topic's name takes 128, a
    /// Discord thread's 100): the agent, the directory's last part and the session's first
    /// characters.
    pub(crate) fn title(&self, max: usize) -> String {
        let short: String = self.session.chars().take(8).collect();
        let dir = self
            .cwd
            .as_deref()
            .and_then(|c| c.trim_end_matches('/').rsplit('/').next())
            .filter(|d| !d.is_empty());
        let title = match dir {
            Some(d) => format!("{} · {d} · {short}", self.agent),
            None => format!("{} · {short}", self.agent),
        };
        title.chars().take(max).collect()
    }

    /// The thread's first message, plain text (the platform escapes it), one fact a line.
    pub(crate) fn lines(&self, locale: Locale) -> Vec<String> {
        let zh = locale == Locale::ZhCn;
        let cwd = self.cwd.as_deref().unwrap_or("?");
        if zh {
            vec![
                format!("智能体会话：{}", self.agent),
                format!("会话：{}", self.session),
                format!("目录：{cwd}"),
            ]
        } else {
            vec![
                format!("Agent session: {}", self.agent),
                format!("Session: {}", self.session),
                format!("Directory: {cwd}"),
            ]
        }
    }
}

/// The outcome of resolved `i` as one line of plain text, for the reply in its message's
/// thread (`thread_replies`): the outcome and when.
pub(crate) fn outcome_line(i: &Interaction, locale: Locale) -> Option<String> {
    let r = i.resolution.as_ref()?;
    let icon = if r.outcome.is_allow() { "✅" } else { "❌" };
    Some(format!(
        "{icon} {} · {}",
        outcome_phrase_in(r, locale),
        format_time(r.at)
    ))
}

/// A session's thread in one chat, as kept in the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Kept {
    /// The platform's id of the thread.
    pub thread: String,
    /// The chat.
    pub address: String,
    /// The session's agent and id (to find out whether it ended).
    pub agent: String,
    /// The session's id.
    pub session: String,
    /// When the thread was opened.
    pub opened: Timestamp,
}

/// One channel's session threads.
#[derive(Clone)]
pub(crate) struct Threads {
    store: Arc<dyn Store>,
    channel: &'static str,
    /// The setting.
    pub per: ThreadPer,
    locks: Arc<KeyedLocks>,
    swept: Arc<Mutex<Option<tokio::time::Instant>>>,
}

impl Lifecycle for Threads {
    /// A session that ended has its threads closed at the channel's next delivery.
    fn session_reported(&self, session: &Session) {
        if self.on() && session.state == SessionState::Gone {
            *self.swept.locked() = None;
        }
    }
}

impl Threads {
    /// The threads of `channel` over `store`, as `per` says.
    pub(crate) fn new(store: Arc<dyn Store>, channel: &'static str, per: ThreadPer) -> Self {
        Self {
            store,
            channel,
            per,
            locks: Arc::default(),
            swept: Arc::default(),
        }
    }

    /// The threads of `channel` as `per` says, on the wiring's store, told by the registry
    /// when a session ends.
    pub(crate) fn installed(w: &super::Wiring, channel: &'static str, per: ThreadPer) -> Self {
        let threads = Self::new(w.store.clone(), channel, per);
        if threads.on() {
            w.registry.add_hook(Arc::new(threads.clone()));
        }
        threads
    }

    /// Whether prompts go in a thread per session.
    pub(crate) fn on(&self) -> bool {
        self.per == ThreadPer::Session
    }

    fn prefix(&self) -> String {
        format!("thread:{}:", self.channel)
    }

    fn key(&self, address: &str, i: &Interaction) -> String {
        format!("{}{address}:{}", self.prefix(), session_key(i))
    }

    /// Holds the thread of `i`'s session at `address` while it is looked up or opened.
    pub(crate) async fn lock(
        &self,
        address: &str,
        i: &Interaction,
    ) -> tokio::sync::OwnedMutexGuard<()> {
        self.locks.lock(&self.key(address, i)).await
    }

    /// The thread `i`'s session has at `address`, if one was opened.
    pub(crate) async fn kept(
        &self,
        address: &str,
        i: &Interaction,
    ) -> Result<Option<Kept>, StoreError> {
        let raw = self.store.get_value(&self.key(address, i)).await?;
        Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// Records that `i`'s session has thread `thread` at `address`; returns the threads to
    /// close to stay within [`MAX_THREADS`] (forgotten already).
    pub(crate) async fn keep(
        &self,
        address: &str,
        i: &Interaction,
        thread: &str,
    ) -> Result<Vec<Kept>, StoreError> {
        let mut all = self.all().await?;
        let mut evicted = Vec::new();
        if all.len() >= MAX_THREADS {
            all.sort_by_key(|(_, k)| k.opened);
            let over = all.len() + 1 - MAX_THREADS;
            for (key, kept) in all.into_iter().take(over) {
                self.store.set_value(&key, None).await?;
                evicted.push(kept);
            }
        }
        let kept = Kept {
            thread: thread.to_string(),
            address: address.to_string(),
            agent: i.agent.as_deref().unwrap_or("").to_string(),
            session: i.session.as_deref().unwrap_or("").to_string(),
            opened: Timestamp::now(),
        };
        let value = serde_json::to_string(&kept).ok();
        self.store.set_value(&self.key(address, i), value).await?;
        Ok(evicted)
    }

    /// Every thread kept for the channel, by key.
    async fn all(&self) -> Result<Vec<(String, Kept)>, StoreError> {
        let raw = self
            .store
            .values_under(&self.prefix(), MAX_THREADS + 1)
            .await?;
        Ok(raw
            .into_iter()
            .filter_map(|(k, v)| Some((k, serde_json::from_str(&v).ok()?)))
            .collect())
    }

    /// Whether a sweep is due (at most one every [`SWEEP_EVERY`] in this process); marks it
    /// started.
    pub(crate) fn sweep_due(&self) -> bool {
        if !self.on() {
            return false;
        }
        let now = tokio::time::Instant::now();
        let mut swept = self.swept.locked();
        match *swept {
            Some(at) if now.duration_since(at) < SWEEP_EVERY => false,
            _ => {
                *swept = Some(now);
                true
            }
        }
    }

    /// The threads whose session ended, forgotten; the caller closes them.
    pub(crate) async fn ended(&self) -> Result<Vec<Kept>, StoreError> {
        let mut ended = Vec::new();
        for (key, kept) in self.all().await? {
            // A session the store does not know (one the agent API named, never reported by a
            // hook) keeps its thread until the bound closes it.
            let session = self.store.session(&kept.agent, &kept.session).await?;
            if session.is_some_and(|s| s.state == SessionState::Gone) {
                self.store.set_value(&key, None).await?;
                ended.push(kept);
            }
        }
        Ok(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opener_names_the_agent_the_session_and_the_directory() {
        let o = Opener {
            agent: "claude-code".into(),
            session: "0123456789abcdef".into(),
            cwd: Some("/home/ann/shop/".into()),
        };
        assert_eq!(o.title(128), "claude-code · shop · 01234567");
        assert_eq!(o.title(11), "claude-code");
        let lines = o.lines(Locale::EnUs);
        assert_eq!(lines[0], "Agent session: claude-code");
        assert_eq!(lines[2], "Directory: /home/ann/shop/");
        assert!(o.lines(Locale::ZhCn)[1].contains("0123456789abcdef"));
    }

    fn asked_in(session: &str) -> Interaction {
        let mut i = Interaction::pending(
            crate::interaction::InteractionId::parse(&format!("t-{session}")).unwrap(),
            "Bash",
            serde_json::Map::new(),
            Timestamp::now(),
            300,
        );
        i.session = Some(session.into());
        i.agent = Some("claude-code".into());
        i
    }

    #[tokio::test]
    async fn past_the_bound_the_oldest_thread_is_given_back_to_close() {
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        let threads = Threads::new(store, "fake", ThreadPer::Session);
        for n in 0..MAX_THREADS {
            let evicted = threads
                .keep("chat", &asked_in(&format!("s-{n}")), &format!("t{n}"))
                .await
                .unwrap();
            assert!(evicted.is_empty());
        }
        let newest = asked_in("s-new");
        let evicted = threads.keep("chat", &newest, "t-new").await.unwrap();
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0].thread, "t0", "the oldest goes");
        assert!(
            threads
                .kept("chat", &asked_in("s-0"))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            threads.kept("chat", &newest).await.unwrap().unwrap().thread,
            "t-new"
        );
        assert_eq!(threads.all().await.unwrap().len(), MAX_THREADS);
    }

    #[tokio::test]
    async fn a_thread_is_given_back_to_close_once_its_session_ended() {
        use crate::interaction::sessions::{SessionEvent, SessionUpdate};
        let store: Arc<dyn Store> = Arc::new(crate::store::MemoryStore::new());
        let threads = Threads::new(store.clone(), "fake", ThreadPer::Session);
        for s in ["s-ends", "s-goes-on", "s-unknown"] {
            threads
                .keep("chat", &asked_in(s), &format!("t-{s}"))
                .await
                .unwrap();
        }
        for (id, event) in [
            ("s-ends", SessionEvent::Ended),
            ("s-goes-on", SessionEvent::Started),
        ] {
            let update = SessionUpdate {
                agent: "claude-code".into(),
                id: id.into(),
                cwd: None,
                route: "default".into(),
                owner: None,
                delivery: Default::default(),
                event,
                at: Timestamp::now(),
            };
            let change = Box::new(move |s: Option<Session>| Some(Session::apply(s, &update)));
            store
                .change_session("claude-code", id, change, Vec::new(), 10)
                .await
                .unwrap();
        }
        let ended = threads.ended().await.unwrap();
        let closed: Vec<&str> = ended.iter().map(|k| k.thread.as_str()).collect();
        assert_eq!(closed, ["t-s-ends"]);
        assert!(
            threads.ended().await.unwrap().is_empty(),
            "forgotten once closed"
        );
        // A session's end wakes the sweep of a channel with threads.
        assert!(threads.sweep_due());
        assert!(!threads.sweep_due());
        let gone = store
            .session("claude-code", "s-ends")
            .await
            .unwrap()
            .unwrap();
        threads.session_reported(&gone);
        assert!(threads.sweep_due());
    }

    #[test]
    fn the_setting_reads_none_and_session() {
        #[derive(Deserialize)]
        struct S {
            thread_per: ThreadPer,
        }
        let s: S = toml::from_str("thread_per = \"session\"").unwrap();
        assert_eq!(s.thread_per, ThreadPer::Session);
        let s: S = toml::from_str("thread_per = \"none\"").unwrap();
        assert_eq!(s.thread_per.as_str(), "none");
        assert!(toml::from_str::<S>("thread_per = \"chat\"").is_err());
    }
}
