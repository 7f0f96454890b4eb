//! Digests: when more than a configured number of interactions are pending for one chat, or
//! when the chat's queue cannot be posted before the requests' deadlines at the platform's
//! pace, every chat channel shows one message per agent session instead of a message each —
//! "5 requests from session s-1 in ~/shop" with Review, Approve all and Deny all — and keeps
//! it up to date as interactions come and go. The digest's store records, its texts' shape
//! ([`Sheet`]) and its answers are here; its flow over the delivery skeleton is in
//! `digest_flow.rs`; a platform only draws a [`Sheet`] and encodes its buttons.
//!
//! - **Held**: a first post whose chat already has more than `digest_after` interactions
//!   pending, that the chat's pace would show too late, or whose chat has a live digest for
//!   its session, is not posted: a marker record
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
    pub(crate) fn code(self) -> char {
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
    pub(crate) fn from_code(c: char) -> Option<Self> {
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

    /// How a platform may style its button: the one that approves, the one that denies, or
    /// neither.
    pub(crate) fn style(self) -> Style {
        match self {
            DigestAction::AllowAll | DigestAction::ConfirmAllow => Style::Primary,
            DigestAction::DenyAll | DigestAction::ConfirmDeny => Style::Danger,
            DigestAction::Review | DigestAction::Cancel => Style::Plain,
        }
    }
}

/// The look of a digest button.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// The approving one.
    Primary,
    /// The denying one.
    Danger,
    /// Any other.
    Plain,
}

/// What a digest message shows: the list, or the confirmation of an "all" answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    /// The members, with Review, Approve all and Deny all.
    List,
    /// The question "approve (deny) all N?", with Yes and Cancel.
    Confirm {
        /// Whether it confirms approving (else denying).
        allow: bool,
    },
}

/// One button of a digest message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Button {
    /// What it says, in the channel's language.
    pub label: String,
    /// What it does.
    pub action: DigestAction,
}

/// A digest message as the kit asks a platform to show it: the texts are written and the
/// buttons chosen; the platform lays them out and encodes each button with the place, the
/// session, its action and the set (see its button codec).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sheet {
    /// The place it is shown in.
    pub address: String,
    /// The session's digest key.
    pub session: String,
    /// The fingerprint of the listed members, which every button carries.
    pub set: String,
    /// The incarnation of its first member (a platform's idempotency key for a new post).
    pub first: String,
    /// The title ("5 requests from session s-1 in ~/shop", or "done" once closed).
    pub title: String,
    /// How many members it holds (0 once closed).
    pub count: usize,
    /// One line per listed member.
    pub lines: Vec<String>,
    /// The listed members' ids, line by line (a platform may link each to the inbox).
    pub listed: Vec<String>,
    /// "… and N more", when not every member is listed.
    pub more: Option<String>,
    /// The question of a confirmation.
    pub question: Option<String>,
    /// Rows of buttons; none once closed.
    pub rows: Vec<Vec<Button>>,
}

impl Sheet {
    /// The digest of `members` (not empty) at `address` for `session`, in `view`.
    pub(crate) fn of(
        texts: Texts,
        address: &str,
        session: &str,
        members: &[Arc<Interaction>],
        view: View,
    ) -> Self {
        let (lines, more) = texts.lines(members);
        let button = |label: &str, action| Button {
            label: label.to_string(),
            action,
        };
        let (question, rows) = match view {
            View::List => {
                let [review, allow, deny] = texts.buttons();
                let rows = vec![
                    vec![button(review, DigestAction::Review)],
                    vec![
                        button(allow, DigestAction::AllowAll),
                        button(deny, DigestAction::DenyAll),
                    ],
                ];
                (None, rows)
            }
            View::Confirm { allow } => {
                let [yes, cancel] = texts.confirm_buttons(allow, members.len());
                let confirm = if allow {
                    DigestAction::ConfirmAllow
                } else {
                    DigestAction::ConfirmDeny
                };
                let rows = vec![vec![
                    button(&yes, confirm),
                    button(&cancel, DigestAction::Cancel),
                ]];
                (Some(texts.confirm(allow, members)), rows)
            }
        };
        Sheet {
            address: address.to_string(),
            session: session.to_string(),
            set: Shown::of(None, members).set,
            first: members.first().map(|i| i.incarnation()).unwrap_or_default(),
            title: texts.title(members.len(), members.first().map(|i| i.as_ref())),
            count: members.len(),
            listed: members
                .iter()
                .take(lines.len())
                .map(|i| i.id.to_string())
                .collect(),
            lines,
            more: (more > 0).then(|| texts.more(more)),
            question,
            rows,
        }
    }

    /// The digest at `address` for `session` once none of its members is left: `title` was
    /// its last title.
    pub(crate) fn closed(texts: Texts, address: &str, session: &str, title: &str) -> Self {
        Sheet {
            address: address.to_string(),
            session: session.to_string(),
            set: String::new(),
            first: String::new(),
            title: texts.done(title),
            count: 0,
            lines: Vec::new(),
            listed: Vec::new(),
            more: None,
            question: None,
            rows: Vec::new(),
        }
    }

    /// Whether it shows a digest with nothing left in it.
    pub(crate) fn is_closed(&self) -> bool {
        self.rows.is_empty()
    }
}

/// What became of an edit of a digest message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edited {
    /// It shows the sheet.
    Done,
    /// It is gone (deleted in the chat): a new one is posted.
    Gone,
    /// The platform cannot change it now (it lets a message change only in answer to a click
    /// on it): it keeps what it showed, and a click on it shows the digest as it now is.
    Cannot,
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
    pub(crate) fn of(message_ref: Option<String>, members: &[Arc<Interaction>]) -> Self {
        let ids: Vec<String> = members.iter().map(|i| i.incarnation()).collect();
        Shown {
            message_ref,
            set: fingerprint(&ids),
            ids,
            title: String::new(),
        }
    }
}

/// Whether an interaction goes to a place (by its address).
pub(crate) type Reach = Arc<dyn Fn(&Interaction, &str) -> bool + Send + Sync>;

/// One channel's digests in the store.
#[derive(Clone)]
pub(crate) struct Digests {
    store: Arc<dyn Store>,
    channel: &'static str,
    /// Held interactions: `digest_after` (0: never).
    pub after: u32,
    /// The channel's configured places, as addresses (where an interaction that names no
    /// route goes).
    places: Arc<Vec<String>>,
    locks: Arc<KeyedLocks>,
    /// Which interactions go to a place, when the routes do not say (Web Push: a device's
    /// person may answer it).
    reach: Option<Reach>,
    /// When each place's queue was last found able to keep up, and with how many pending:
    /// the queue is not weighed again until more arrive or a moment passes.
    weighed: Arc<Mutex<HashMap<String, (tokio::time::Instant, usize)>>>,
}

impl Digests {
    /// The digests of `channel` over `store`, holding posts past `after` pending per chat;
    /// `places` are the channel's configured places.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        channel: &'static str,
        after: u32,
        places: Vec<String>,
    ) -> Self {
        Self {
            store,
            channel,
            after,
            places: Arc::new(places),
            locks: Arc::default(),
            reach: None,
            weighed: Arc::default(),
        }
    }

    /// These digests with `reach` saying which interactions go to a place, instead of the
    /// routes and the configured places.
    pub(crate) fn with_reach(mut self, reach: Reach) -> Self {
        self.reach = Some(reach);
        self
    }

    /// Whether digests past `digest_after` are on (a queue that cannot keep up is gathered
    /// either way).
    pub(crate) fn on(&self) -> bool {
        self.after > 0
    }

    /// The channel's name.
    pub(crate) fn channel(&self) -> &'static str {
        self.channel
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Whether interaction `i` goes to the place at `address`.
    pub(crate) fn goes_to(&self, i: &Interaction, address: &str) -> bool {
        if let Some(reach) = &self.reach {
            return reach(i, address);
        }
        super::plan::goes_to(i, self.channel, &self.places, address)
    }

    /// Whether the queue of `address` was found able to keep up within `within`, with no
    /// more than `pending` interactions pending for it.
    pub(crate) fn weighed_lately(&self, address: &str, pending: usize, within: Duration) -> bool {
        let now = tokio::time::Instant::now();
        let mut map = self.weighed.locked();
        map.retain(|_, (at, _)| now.duration_since(*at) < within);
        map.get(address).is_some_and(|(_, n)| pending <= *n)
    }

    /// Notes that the queue of `address` keeps up with `pending` interactions pending.
    pub(crate) fn keeps_up(&self, address: &str, pending: usize) {
        self.weighed
            .locked()
            .insert(address.to_string(), (tokio::time::Instant::now(), pending));
    }

    fn marker_channel(&self) -> String {
        format!("{}:digest", self.channel)
    }

    fn shown_key(&self, address: &str, session: &str) -> String {
        format!("digest:{}:{address}:{session}", self.channel)
    }

    /// Holds the digest `(address, session)` while it is read and changed in this process.
    pub(crate) async fn lock(
        &self,
        address: &str,
        session: &str,
    ) -> tokio::sync::OwnedMutexGuard<()> {
        self.locks.lock(&self.shown_key(address, session)).await
    }

    /// What the digest `(address, session)` last showed, while it lives.
    pub(crate) async fn shown(
        &self,
        address: &str,
        session: &str,
    ) -> Result<Option<Shown>, StoreError> {
        let raw = self
            .store
            .get_value(&self.shown_key(address, session))
            .await?;
        Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// Records what the digest shows now (`None`: it is closed and forgotten).
    pub(crate) async fn set_shown(
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
    pub(crate) async fn claim_post(
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
    pub(crate) async fn release_post(
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

    /// Marks `i` as held in `address`'s digest.
    pub(crate) async fn hold(&self, i: &Interaction, address: &str) -> Result<(), StoreError> {
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
    pub(crate) async fn is_held(&self, address: &str, i: &Interaction) -> Result<bool, StoreError> {
        Ok(self
            .store
            .message(&self.marker_channel(), address, &i.incarnation())
            .await?
            .is_some())
    }

    /// The chats whose digests hold `i`.
    pub(crate) async fn held_in(&self, i: &Interaction) -> Result<Vec<String>, StoreError> {
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
    pub(crate) async fn members(
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
pub(crate) struct KeyedLocks {
    // A std mutex: only the map is guarded, never across an await.
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    /// Holds `key` until the guard is dropped.
    pub(crate) async fn lock(&self, key: &str) -> tokio::sync::OwnedMutexGuard<()> {
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
pub(crate) fn parse_incarnation(inc: &str) -> Option<(InteractionId, i64)> {
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
        let d = Digests::new(store.clone(), "fake", 2, vec!["chat".into()]);
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
        // Unrouted interactions go to the configured places only.
        assert!(d.goes_to(&mine[0], "chat") && !d.goes_to(&mine[0], "other"));
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
        assert!(d.on() && !Digests::new(store, "fake", 0, Vec::new()).on());
    }
}
