//! Digests: when more than a configured number of interactions are pending for one chat, a
//! chat platform (Telegram, Feishu) shows one message per agent session instead of a message
//! each — "5 requests from session s-1 in ~/shop" with Review, Approve all and Deny all — and
//! keeps it up to date as interactions come and go. What every such channel shares is here;
//! each renders and delivers it in its own `digest.rs`.
//!
//! - **Held**: a first post whose chat already has more than `digest_after` interactions
//!   pending (or that has a live digest for its session) is not posted: a marker record
//!   (`<channel>:digest`, the chat, the interaction's incarnation) says it is held there. The
//!   marker is deleted with the interaction, so nothing outlives it.
//! - **Members**: a digest's members are computed from the store each time, never kept as
//!   a list: the pending interactions of its session held in its chat.
//! - **Shown**: what the message last showed (its id, the members' incarnations and their
//!   fingerprint) is a small named value, removed when the digest empties. Its buttons carry
//!   that fingerprint under the channel's signed token: "Approve all" answers exactly the
//!   interactions listed when the person saw it, and a tap whose fingerprint is no longer the
//!   one shown (an interaction arrived or left since) is refused as stale, never widened.
//! - **Coalesced**: every change asks for a refresh job keyed by (chat, session, time
//!   window): all the changes within one window ([`EDIT_GAP`]) make one edit at its end.
//! - **Answering all**: after a confirmation, each listed interaction is answered on its own
//!   through the channel's answer pipeline (approver and route checks per interaction), with
//!   its own result, as `POST /v1/respond` answers each of its ids. The individual messages of
//!   a resolved interaction are updated by its usual `resolved` job.
//!
//! The texts, in English and Chinese, are in `digest_texts.rs` ([`Texts`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jiff::Timestamp;
use sha2::{Digest as _, Sha256};

use crate::channels::pipeline::{Feedback, Pipeline, Tap};
use crate::interaction::{Answer, Interaction, InteractionId, Kind, Responder};
use crate::store::{ChannelMessage, Store, StoreError};
use crate::sync::LockExt;

/// The window within which the changes to one digest make one edit: within Telegram's
/// 20 messages a minute in a group, and well within Feishu's 5 requests a second per chat.
pub(crate) const EDIT_GAP: Duration = Duration::from_secs(3);
/// The largest `digest_after` a channel takes.
pub(crate) const MAX_AFTER: u32 = 1000;

/// What a digest button does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DigestAction {
    /// Post the next held member on its own, with its buttons.
    Review,
    /// Ask to confirm allowing every listed approval.
    AllowAll,
    /// Ask to confirm denying every listed interaction.
    DenyAll,
    /// Allow every listed approval (the confirmation's "Yes").
    ConfirmAllow,
    /// Deny every listed interaction (the confirmation's "Yes").
    ConfirmDeny,
    /// Back to the list, answering nothing.
    Cancel,
}

impl DigestAction {
    /// The action's one-letter code in button data.
    pub fn code(self) -> char {
        match self {
            DigestAction::Review => 'r',
            DigestAction::AllowAll => 'a',
            DigestAction::DenyAll => 'd',
            DigestAction::ConfirmAllow => 'A',
            DigestAction::ConfirmDeny => 'D',
            DigestAction::Cancel => 'c',
        }
    }

    /// The action a code names.
    pub fn from_code(c: char) -> Option<Self> {
        Some(match c {
            'r' => DigestAction::Review,
            'a' => DigestAction::AllowAll,
            'd' => DigestAction::DenyAll,
            'A' => DigestAction::ConfirmAllow,
            'D' => DigestAction::ConfirmDeny,
            'c' => DigestAction::Cancel,
            _ => return None,
        })
    }
}

/// base64url of the first 8 bytes of SHA-256 over `domain` and `parts`, newline-joined: 11
/// characters.
fn short_hash(domain: &str, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    for p in parts {
        h.update(b"\n");
        h.update(p.as_bytes());
    }
    URL_SAFE_NO_PAD.encode(&h.finalize()[..8])
}

/// The key of the digest of `i`'s session (the same for every interaction without one):
/// 11 URL-safe characters, whatever the session id is.
pub(crate) fn session_key(i: &Interaction) -> String {
    match &i.session {
        Some(s) => short_hash("imrelay/digest/session", &[s]),
        None => short_hash("imrelay/digest/no-session", &[]),
    }
}

/// The fingerprint of a set of interactions (their incarnations, in any order): 11 URL-safe
/// characters.
pub(crate) fn fingerprint<S: AsRef<str>>(incarnations: &[S]) -> String {
    let mut sorted: Vec<&str> = incarnations.iter().map(AsRef::as_ref).collect();
    sorted.sort_unstable();
    short_hash("imrelay/digest/set", &sorted)
}

/// What a digest message last showed: kept as a small named value while the digest lives.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Shown {
    /// The platform's id of the digest message, once posted.
    pub message_ref: Option<String>,
    /// The incarnations of the members it lists, oldest first.
    pub ids: Vec<String>,
    /// Their fingerprint, which its buttons carry.
    pub set: String,
    /// Its title, kept for the text it shows once closed.
    #[serde(default)]
    pub title: String,
}

impl Shown {
    /// What a message listing `members` shows.
    pub fn of(message_ref: Option<String>, members: &[Arc<Interaction>]) -> Self {
        let ids: Vec<String> = members.iter().map(|i| i.incarnation()).collect();
        Shown {
            message_ref,
            set: fingerprint(&ids),
            ids,
            title: String::new(),
        }
    }
}

/// One channel's digests in the store.
#[derive(Clone)]
pub(crate) struct Digests {
    store: Arc<dyn Store>,
    channel: &'static str,
    /// Held interactions: `digest_after` (0: never).
    pub after: u32,
    locks: Arc<KeyedLocks>,
}

impl Digests {
    /// The digests of `channel` over `store`, holding posts past `after` pending per chat.
    pub fn new(store: Arc<dyn Store>, channel: &'static str, after: u32) -> Self {
        Self {
            store,
            channel,
            after,
            locks: Arc::default(),
        }
    }

    /// Whether digests are on.
    pub fn on(&self) -> bool {
        self.after > 0
    }

    fn marker_channel(&self) -> String {
        format!("{}:digest", self.channel)
    }

    fn shown_key(&self, address: &str, session: &str) -> String {
        format!("digest:{}:{address}:{session}", self.channel)
    }

    /// Holds the digest `(address, session)` while it is read and changed in this process.
    pub async fn lock(&self, address: &str, session: &str) -> tokio::sync::OwnedMutexGuard<()> {
        self.locks.lock(&self.shown_key(address, session)).await
    }

    /// What the digest `(address, session)` last showed, while it lives.
    pub async fn shown(&self, address: &str, session: &str) -> Result<Option<Shown>, StoreError> {
        let raw = self
            .store
            .get_value(&self.shown_key(address, session))
            .await?;
        Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// Records what the digest shows now (`None`: it is closed and forgotten).
    pub async fn set_shown(
        &self,
        address: &str,
        session: &str,
        shown: Option<&Shown>,
    ) -> Result<(), StoreError> {
        let value = shown.and_then(|s| serde_json::to_string(s).ok());
        self.store
            .set_value(&self.shown_key(address, session), value)
            .await
    }

    /// Claims posting the digest `(address, session)` whose first member is `first`, across
    /// every process on the store, for a minute: `false` while another is posting it.
    pub async fn claim_post(
        &self,
        address: &str,
        session: &str,
        first: &Interaction,
    ) -> Result<bool, StoreError> {
        let until = Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(60))
            .unwrap_or(Timestamp::MAX);
        let key = format!("{address}:{session}:{}", first.incarnation());
        self.store
            .first_sighting(&format!("{}-digest-post", self.channel), &key, until)
            .await
    }

    /// Gives up a claim of [`Digests::claim_post`] (the post failed; a retry may claim it).
    pub async fn release_post(
        &self,
        address: &str,
        session: &str,
        first: &Interaction,
    ) -> Result<(), StoreError> {
        let key = format!("{address}:{session}:{}", first.incarnation());
        self.store
            .forget_sighting(&format!("{}-digest-post", self.channel), &key)
            .await
    }

    /// Whether the first post of `i` to `address` is held for a digest: digests are on and
    /// either more than `after` interactions are pending for that chat (`for_chat` says
    /// which go there) or the chat has a live digest for its session.
    pub async fn should_hold(
        &self,
        i: &Interaction,
        address: &str,
        for_chat: impl Fn(&Interaction) -> bool,
    ) -> Result<bool, StoreError> {
        if !self.on() || !i.is_pending() {
            return Ok(false);
        }
        if self.is_held(address, i).await? {
            return Ok(true);
        }
        let pending = self.store.pending().await?;
        let here = pending.iter().filter(|p| for_chat(p)).count();
        if here > self.after as usize {
            return Ok(true);
        }
        Ok(self.shown(address, &session_key(i)).await?.is_some())
    }

    /// Marks `i` as held in `address`'s digest.
    pub async fn hold(&self, i: &Interaction, address: &str) -> Result<(), StoreError> {
        self.store
            .record_message(ChannelMessage {
                channel: self.marker_channel(),
                address: address.to_string(),
                message_ref: i.incarnation(),
                interaction_id: i.id.clone(),
                state: None,
                created_at: Timestamp::now(),
            })
            .await
    }

    /// Whether `i` is held in `address`'s digest.
    pub async fn is_held(&self, address: &str, i: &Interaction) -> Result<bool, StoreError> {
        Ok(self
            .store
            .message(&self.marker_channel(), address, &i.incarnation())
            .await?
            .is_some())
    }

    /// The chats whose digests hold `i`.
    pub async fn held_in(&self, i: &Interaction) -> Result<Vec<String>, StoreError> {
        let inc = i.incarnation();
        Ok(self
            .store
            .messages(&self.marker_channel(), &i.id)
            .await?
            .into_iter()
            .filter(|m| m.message_ref == inc)
            .map(|m| m.address)
            .collect())
    }

    /// The members of digest `(address, session)` now: its session's pending interactions
    /// held in that chat, oldest first.
    pub async fn members(
        &self,
        address: &str,
        session: &str,
    ) -> Result<Vec<Arc<Interaction>>, StoreError> {
        let mut out = Vec::new();
        for i in self.store.pending().await? {
            if session_key(&i) == session && self.is_held(address, &i).await? {
                out.push(i);
            }
        }
        Ok(out)
    }
}

/// When the refresh asked for now runs, and the window's name for its job key: the end of
/// the current [`EDIT_GAP`] window, so every change within it makes one edit.
pub(crate) fn refresh_window(now: Timestamp) -> (Timestamp, String) {
    let gap = EDIT_GAP.as_millis() as i64;
    let end = (now.as_millisecond() / gap + 1) * gap;
    let at = Timestamp::from_millisecond(end).unwrap_or(now);
    (at, end.to_string())
}

/// In-process locks by key, forgotten when nobody holds or waits for them.
#[derive(Default)]
struct KeyedLocks {
    // A std mutex: only the map is guarded, never across an await.
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let m = {
            let mut map = self.map.locked();
            map.retain(|_, m| Arc::strong_count(m) > 1 || m.try_lock().is_err());
            map.entry(key.to_string()).or_default().clone()
        };
        m.lock_owned().await
    }
}

/// Who tapped a digest button, as the answer pipeline takes them.
pub(crate) struct Tapper<'a> {
    /// How the audit trail names them.
    pub actor: &'a str,
    /// Their id on the channel.
    pub identity: &'a str,
    /// Whether they are on the channel's approver list.
    pub approver: bool,
    /// How their answers are recorded.
    pub responder: Responder,
}

/// Whether `who` may act on a digest at all (on the channel's approver list, or a configured
/// person); a refusal is recorded in the audit trail.
pub(crate) async fn admit_tapper(pipeline: &Pipeline, who: &Tapper<'_>) -> Result<(), Feedback> {
    let teams = pipeline.registry().teams();
    let via = pipeline.via();
    if who.approver || teams.people.name_of(via.as_str(), who.identity).is_some() {
        return Ok(());
    }
    let recorded = pipeline
        .registry()
        .refused(
            None,
            who.actor,
            via,
            &format!("a digest button; not in {via}.approvers"),
        )
        .await;
    Err(match recorded {
        Ok(()) => Feedback::NotApprover,
        // Not recorded: try again.
        Err(_) => Feedback::StoreDown,
    })
}

/// The interaction and creation time an incarnation (`<id>:<created ms>`) names.
fn parse_incarnation(inc: &str) -> Option<(InteractionId, i64)> {
    let (id, ms) = inc.rsplit_once(':')?;
    Some((InteractionId::parse(id).ok()?, ms.parse().ok()?))
}

/// Answers each interaction of `incarnations` on its own — allow (approvals only; a question
/// or form is left for Review) or deny — as `who`, through the pipeline's checks for each.
pub(crate) async fn answer_all(
    pipeline: &Pipeline,
    incarnations: &[String],
    allow: bool,
    who: &Tapper<'_>,
) -> Tally {
    let mut t = Tally::default();
    for inc in incarnations {
        let Some((id, created)) = parse_incarnation(inc) else {
            t.already += 1;
            continue;
        };
        let tap = Tap {
            id: &id,
            created: Some(created),
            actor: who.actor,
            identity: who.identity,
            approver: who.approver,
            audit: true,
        };
        // A question or a form is not an allow's to answer: left for Review unrefused.
        let i = match pipeline.admit(&tap, |_| true).await {
            Ok(i) => i,
            Err(stop) => {
                count(&mut t, &stop.feedback);
                continue;
            }
        };
        if allow && i.kind != Kind::Approval {
            t.skipped += 1;
            continue;
        }
        let answer = if allow {
            Answer::allow()
        } else {
            Answer::deny(None)
        };
        let f = pipeline.respond(&id, answer, who.responder.clone()).await;
        count(&mut t, &f);
    }
    t
}

fn count(t: &mut Tally, f: &Feedback) {
    match f {
        // A vote on an approval that needs several people is this person's answer, taken.
        Feedback::Resolved(_) | Feedback::Voted(_) => t.answered += 1,
        Feedback::Already(_) | Feedback::NotFound | Feedback::AlreadyVoted(..) => t.already += 1,
        Feedback::NotApprover | Feedback::OtherRoute(_) | Feedback::StepUp(_) => t.refused += 1,
        Feedback::BadButton | Feedback::Invalid(_) => t.skipped += 1,
        Feedback::StoreDown | Feedback::StillWorking => t.failed += 1,
    }
}

pub(crate) use super::digest_texts::{Tally, Texts};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn pending(id: &str, session: Option<&str>, created_ms: i64) -> Interaction {
        Interaction {
            session: session.map(Into::into),
            cwd: Some("/home/dev/shop".into()),
            ..Interaction::pending(
                InteractionId::parse(id).unwrap(),
                "Bash",
                serde_json::json!({"command": "cargo test"})
                    .as_object()
                    .unwrap()
                    .clone(),
                Timestamp::from_millisecond(created_ms).unwrap(),
                300,
            )
        }
    }

    #[test]
    fn fingerprints_bind_the_exact_set_in_any_order() {
        let a = fingerprint(&["a:1", "b:2"]);
        assert_eq!(a, fingerprint(&["b:2", "a:1"]));
        assert_ne!(a, fingerprint(&["a:1", "b:2", "c:3"]));
        assert_ne!(a, fingerprint(&["a:1", "b:3"]), "another incarnation of b");
        assert_eq!(a.len(), 11);
        let i = pending("x", Some("s-1"), 1);
        assert_eq!(session_key(&i).len(), 11);
        assert_ne!(session_key(&i), session_key(&pending("x", None, 1)));
    }

    #[test]
    fn codes_round_trip() {
        for a in [
            DigestAction::Review,
            DigestAction::AllowAll,
            DigestAction::DenyAll,
            DigestAction::ConfirmAllow,
            DigestAction::ConfirmDeny,
            DigestAction::Cancel,
        ] {
            assert_eq!(DigestAction::from_code(a.code()), Some(a));
        }
        assert_eq!(DigestAction::from_code('x'), None);
    }

    #[test]
    fn refreshes_within_one_window_share_one_job() {
        let t = |ms| Timestamp::from_millisecond(ms).unwrap();
        let (at, key) = refresh_window(t(1_000));
        assert_eq!(refresh_window(t(2_999)).1, key);
        assert_eq!(at, t(3_000));
        assert_ne!(refresh_window(t(3_000)).1, key);
    }

    #[tokio::test]
    async fn members_are_the_sessions_pending_interactions_held_in_that_chat() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let d = Digests::new(store.clone(), "fake", 2);
        let mine = [
            pending("a", Some("s-1"), 1_000),
            pending("b", Some("s-1"), 2_000),
            pending("c", Some("s-2"), 3_000),
        ];
        for i in &mine {
            store
                .create(Arc::new(i.clone()), Default::default())
                .await
                .unwrap();
        }
        let all = |_: &Interaction| true;
        // Three pending for the chat, more than two: held.
        assert!(d.should_hold(&mine[0], "chat", all).await.unwrap());
        assert!(!d.should_hold(&mine[0], "chat", |_| false).await.unwrap());
        for i in &mine {
            d.hold(i, "chat").await.unwrap();
        }
        let s1 = session_key(&mine[0]);
        let members = d.members("chat", &s1).await.unwrap();
        let ids: Vec<_> = members.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(d.members("other", &s1).await.unwrap().is_empty());
        assert_eq!(d.held_in(&mine[1]).await.unwrap(), ["chat"]);
        // Shown state round-trips and is forgotten.
        let shown = Shown::of(Some("42".into()), &members);
        d.set_shown("chat", &s1, Some(&shown)).await.unwrap();
        assert_eq!(d.shown("chat", &s1).await.unwrap(), Some(shown));
        d.set_shown("chat", &s1, None).await.unwrap();
        assert_eq!(d.shown("chat", &s1).await.unwrap(), None);
        // Posting a digest is claimed once across processes, until given up.
        assert!(d.claim_post("chat", &s1, &mine[0]).await.unwrap());
        assert!(!d.claim_post("chat", &s1, &mine[0]).await.unwrap());
        d.release_post("chat", &s1, &mine[0]).await.unwrap();
        assert!(d.claim_post("chat", &s1, &mine[0]).await.unwrap());
        // Off: never held.
        let off = Digests::new(store, "fake", 0);
        assert!(!off.should_hold(&mine[0], "chat", all).await.unwrap());
    }
}
