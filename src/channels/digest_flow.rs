//! The digest's flow on the delivery skeleton, the same for every chat channel (see
//! [`super::digest`] for what a digest is): which first posts are held, the refresh job that
//! posts, edits and closes a digest message, and what a click on one of its buttons does. A
//! platform supplies only how a [`Sheet`] is drawn and sent (`Platform::post_digest`,
//! `Platform::edit_digest`) and how its buttons are encoded.
//!
//! **A burst never waits behind a platform's rate limit.** Before a first post, the place's
//! queue is weighed: the interactions pending for it, neither posted there nor held, in
//! deadline order, one every `pace` from now (or from when a throttled place may speak
//! again). Every one of them that would be posted less than [`MIN_NOTICE`] before its
//! deadline, though it alone would have been in time, is gathered into its session's digest
//! at once — whether or not `digest_after` is set — and the others are posted one by one.
//! So a request is never left to expire unseen while the place could have shown it: a
//! digest takes one message, whatever it holds.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::OwnedMutexGuard;

use super::digest::{
    DigestAction, Digests, Edited, Sheet, Shown, Tapper, View, admit_tapper, answer_all,
    refresh_window, session_key,
};
use super::digest_texts::Texts;
use super::messages::{Failure, Messages, Platform};
use super::pipeline::{Feedback, Pipeline};
use super::plan::{ChatJob, Todo, is_first_post, repost_job};
use crate::interaction::{Interaction, after};
use crate::outbox::{Delivery, UPDATE_HORIZON};
use crate::store::{OutboxJob, StoreError};

/// The least time before its deadline a request posted on its own must have: one shown
/// later is gathered into the digest instead (a person needs a moment to read and answer).
pub(crate) const MIN_NOTICE: Duration = Duration::from_secs(10);

/// Why a first post is held for a digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// Held already (an earlier attempt, or gathered by another post's weighing).
    Held,
    /// Its session has a live digest in that place.
    Joins,
    /// More than `digest_after` are pending for the place.
    Many,
    /// The place's queue cannot post it in time.
    Behind,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Why::Held => "held already",
            Why::Joins => "its session has a digest there",
            Why::Many => "more than digest_after pending there",
            Why::Behind => "the place's pace would show it too late",
        }
    }
}

impl<P: Platform> Messages<P> {
    /// A first post of pending `i` to `target` held for the place's digest: the delivery, or
    /// `None` when it is posted as usual.
    pub(super) async fn hold_for_digest(
        &self,
        job: &OutboxJob,
        i: &Interaction,
        target: &P::Target,
    ) -> Option<Delivery> {
        let channel = self.platform.channel();
        if !self.platform.has_digests() || !is_first_post::<P::Job>(channel, job) {
            return None;
        }
        let address = self.platform.address(target);
        let why = match self.why_hold(i, &address).await {
            Ok(Some(why)) => why,
            Ok(None) => return None,
            Err(e) => return Some(Delivery::store_retry(e)),
        };
        let held = async {
            self.digests.hold(i, &address).await?;
            self.ask_refresh(i, &address).await
        };
        if let Err(e) = held.await {
            return Some(Delivery::store_retry(e));
        }
        tracing::info!(id = %i.id, chat = %address, why = why.as_str(), "{channel}: held for the session's digest");
        Some(Delivery::Done)
    }

    /// Asks the refresh of the digest of `i`'s session at `address`.
    async fn ask_refresh(&self, i: &Interaction, address: &str) -> Result<(), StoreError> {
        let Some(to) = P::Job::target(address) else {
            return Ok(());
        };
        let job = digest_job::<P::Job>(self.platform.channel(), i, to, &session_key(i));
        self.store.enqueue(vec![job]).await
    }

    async fn why_hold(&self, i: &Interaction, address: &str) -> Result<Option<Why>, StoreError> {
        let d = &self.digests;
        if d.is_held(address, i).await? {
            return Ok(Some(Why::Held));
        }
        if d.shown(address, &session_key(i)).await?.is_some() {
            return Ok(Some(Why::Joins));
        }
        let pending = self.store.pending().await?;
        let here: Vec<Arc<Interaction>> = pending
            .into_iter()
            .filter(|p| d.goes_to(p, address))
            .collect();
        if d.on() && here.len() > d.after as usize {
            return Ok(Some(Why::Many));
        }
        if self.gather_late(i, address, here).await? {
            return Ok(Some(Why::Behind));
        }
        Ok(None)
    }

    /// The pace of `address`: the platform's, else the pacer's gap.
    fn pace(&self, address: &str) -> Duration {
        self.platform
            .pace(address)
            .unwrap_or_else(|| self.pacer.gap())
    }

    /// Weighs the queue of `address` (`here`: the interactions pending for it) and gathers
    /// every one the pace would post too late into its session's digest; says whether `i` is
    /// one of them.
    async fn gather_late(
        &self,
        i: &Interaction,
        address: &str,
        here: Vec<Arc<Interaction>>,
    ) -> Result<bool, StoreError> {
        let pace = self.pace(address);
        if pace.is_zero() {
            return Ok(false);
        }
        let now = Timestamp::now();
        let start = now
            .checked_add(self.pacer.wait(address))
            .unwrap_or(Timestamp::MAX);
        // Even if none of them were posted yet, all would be in time: nothing to weigh.
        if late(start, pace, &here).is_empty()
            || self.digests.weighed_lately(address, here.len(), pace)
        {
            return Ok(false);
        }
        let channel = self.platform.channel();
        let mut queue = Vec::new();
        for p in here {
            let posted = self
                .store
                .messages(channel, &p.id)
                .await?
                .iter()
                .any(|m| m.address == address);
            if p.incarnation() == i.incarnation()
                || !(posted || self.digests.is_held(address, &p).await?)
            {
                queue.push(p);
            }
        }
        let gathered = late(start, pace, &queue);
        if gathered.is_empty() {
            self.digests.keeps_up(address, queue.len());
            return Ok(false);
        }
        let mut mine = false;
        for p in &gathered {
            if p.incarnation() == i.incarnation() {
                mine = true;
                continue;
            }
            self.digests.hold(p, address).await?;
            self.ask_refresh(p, address).await?;
        }
        tracing::info!(chat = %address, gathered = gathered.len(), queue = queue.len(), pace_ms = pace.as_millis() as u64,
            "{channel}: the place cannot post its queue in time; gathered into digests");
        Ok(mine)
    }

    /// A resolved interaction held in digests: their refresh is asked for (also with
    /// digests turned off since: the ones still open are closed).
    pub(super) async fn digests_of_resolved(&self, job: &OutboxJob) -> Result<(), StoreError> {
        let Some(id) = job.interaction_id.as_ref() else {
            return Ok(());
        };
        let Some(i) = self.store.get(id).await?.filter(|i| job.is_for(i)) else {
            return Ok(());
        };
        let channel = self.platform.channel();
        let jobs: Vec<_> = self
            .digests
            .held_in(&i)
            .await?
            .iter()
            .filter_map(|a| P::Job::target(a))
            .map(|to| digest_job::<P::Job>(channel, &i, to, &session_key(&i)))
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        self.store.enqueue(jobs).await
    }

    /// Delivers a digest job: the digest of `session` at `to` shows its members as they are
    /// now (posted when new, edited when they changed, closed when none is left).
    pub(super) async fn refresh_digest(&self, to: &P::Target, session: &str) -> Delivery {
        let address = self.platform.address(to);
        let _held = self.digests.lock(&address, session).await;
        match self.show_digest(to, &address, session).await {
            Ok(()) => Delivery::Done,
            Err(f) => f.delivery(),
        }
    }

    async fn show_digest(
        &self,
        to: &P::Target,
        address: &str,
        session: &str,
    ) -> Result<(), Failure> {
        let channel = self.platform.channel();
        let texts = self.platform.texts();
        let d = &self.digests;
        let members = d.members(address, session).await.map_err(Failure::store)?;
        let shown = d.shown(address, session).await.map_err(Failure::store)?;
        let message = shown.as_ref().and_then(|s| s.message_ref.clone());
        if members.is_empty() {
            if let (Some(s), Some(m)) = (&shown, &message) {
                self.pacer.turn(address).await;
                let closed = Sheet::closed(texts, address, session, &s.title);
                match self.platform.edit_digest(address, m, &closed).await {
                    // Never shown closed: forgotten all the same.
                    Ok(_) | Err(Failure::Permanent(_)) => {}
                    Err(f) => return Err(self.pacer.note(address, f)),
                }
            }
            return d
                .set_shown(address, session, None)
                .await
                .map_err(Failure::store);
        }
        let mut next = Shown::of(None, &members);
        next.title = texts.title(members.len(), Some(&members[0]));
        if shown.as_ref().is_some_and(|s| s.set == next.set) && message.is_some() {
            return Ok(());
        }
        let sheet = Sheet::of(texts, address, session, &members, View::List);
        self.pacer.turn(address).await;
        let edited = match &message {
            Some(m) => self
                .platform
                .edit_digest(address, m, &sheet)
                .await
                .map_err(|f| self.pacer.note(address, f))?,
            None => Edited::Gone,
        };
        let posted = match (edited, message) {
            (Edited::Done, Some(m)) => m,
            // It keeps what it showed until someone clicks it.
            (Edited::Cannot, Some(_)) => return Ok(()),
            _ => {
                self.post_digest(to, address, session, &members[0], &sheet)
                    .await?
            }
        };
        tracing::info!(chat = %address, message = %posted, members = members.len(), "{channel}: digest shown");
        next.message_ref = Some(posted);
        d.set_shown(address, session, Some(&next))
            .await
            .map_err(Failure::store)
    }

    /// Posts a new digest message, once across replicas: another process posting the same
    /// digest makes this a retry, which then finds its message and edits it.
    async fn post_digest(
        &self,
        to: &P::Target,
        address: &str,
        session: &str,
        first: &Interaction,
        sheet: &Sheet,
    ) -> Result<String, Failure> {
        let d = &self.digests;
        let claimed = d.claim_post(address, session, first).await;
        if !claimed.map_err(Failure::store)? {
            return Err(Failure::Transient(
                "another process is posting this digest".into(),
            ));
        }
        let sent = self.platform.post_digest(to, sheet).await;
        let channel = self.platform.channel();
        match &sent {
            Err(_) => {
                if let Err(e) = d.release_post(address, session, first).await {
                    tracing::warn!(chat = %address, error = %e, "{channel}: could not release a digest's post");
                }
            }
            // A digest is one of its session's messages: a reply to it reaches the session.
            Ok(message) if self.platform.digests_steer() => {
                let store = self.store.as_ref();
                let said = self.platform.digest_reply_ref(address, message);
                let remembered =
                    super::steer::remember_digest(store, channel, address, first, said).await;
                if let Err(e) = remembered {
                    tracing::warn!(chat = %address, error = %e, "{channel}: could not remember a session's digest");
                }
            }
            Ok(_) => {}
        }
        sent.map_err(|f| self.pacer.note(address, f))
    }

    /// Shows what a click asked to redraw on the clicked digest message (a platform that
    /// edits messages itself, rather than answering the click with the new message).
    pub(crate) async fn redraw(&self, tapped: &Tapped) {
        let Some(sheet) = &tapped.redraw else {
            return;
        };
        let Some(message) = &tapped.message else {
            return;
        };
        self.pacer.turn(&sheet.address).await;
        if let Err(f) = self
            .platform
            .edit_digest(&sheet.address, message, sheet)
            .await
        {
            let channel = self.platform.channel();
            tracing::warn!(chat = %sheet.address, error = %f.error(), "{channel}: could not update a digest");
        }
    }
}

/// The job that brings the digest of `session` at `to` up to date at the end of the current
/// edit window (every change within it shares the job); `i` is the change's interaction.
fn digest_job<J: ChatJob>(
    channel: &str,
    i: &Interaction,
    to: J::Target,
    session: &str,
) -> OutboxJob {
    let (at, window) = refresh_window(Timestamp::now());
    let key = format!("{channel}:digest:{}:{session}:{window}", J::address(&to));
    let job = J::make(Todo::Digest {
        to,
        session: session.to_string(),
    });
    job.plan_keyed(key, i, at, after(at, UPDATE_HORIZON))
}

/// A verified click on a digest button: where, which digest, what, the set it carried, and
/// the message it was on.
pub(crate) struct Press<'a> {
    /// The place.
    pub address: &'a str,
    /// The session's digest key.
    pub session: &'a str,
    /// The button's action.
    pub action: DigestAction,
    /// The fingerprint it carried.
    pub set: &'a str,
    /// The platform's id of the message it was on.
    pub message: &'a str,
}

/// What a click did: what to tell the person, and what the digest message shows now (none:
/// unchanged). The digest stays locked while this is held, so the redraw is shown before
/// another click reads it.
pub(crate) struct Tapped {
    /// The toast.
    pub toast: String,
    /// The digest as it now is, to show on the clicked message.
    pub redraw: Option<Sheet>,
    /// The clicked message.
    pub message: Option<String>,
    _held: Option<OwnedMutexGuard<()>>,
}

impl Tapped {
    fn say(toast: String) -> Self {
        Tapped {
            toast,
            redraw: None,
            message: None,
            _held: None,
        }
    }
}

impl Digests {
    /// What a verified click on a digest button does, for the person `who` (admitted here,
    /// each answer checked on its own by `pipeline`), in `texts`: a Review posts the next
    /// member on its own; Approve all and Deny all ask to confirm; a confirmation answers
    /// exactly the listed members; a set no longer listed is refused as stale and the list
    /// shown as it now is.
    pub(crate) async fn tap<J: ChatJob>(
        &self,
        pipeline: &Pipeline,
        texts: Texts,
        press: &Press<'_>,
        who: &Tapper<'_>,
    ) -> Result<Tapped, Feedback> {
        admit_tapper(pipeline, who).await?;
        let (address, session) = (press.address, press.session);
        let held = self.lock(address, session).await;
        let Some(shown) = self.shown(address, session).await.map_err(down)? else {
            return Ok(Tapped::say(texts.closed()));
        };
        if shown.message_ref.as_deref() != Some(press.message) {
            return Err(Feedback::BadButton);
        }
        let members = self.members(address, session).await.map_err(down)?;
        let now = Shown::of(shown.message_ref.clone(), &members);
        let (toast, view) = match press.action {
            DigestAction::Review => {
                let toast = self.review::<J>(press, &members, texts).await?;
                return Ok(Tapped::say(toast));
            }
            DigestAction::Cancel => (texts.cancelled(), View::List),
            // The list changed since it was shown (or since this confirmation): nothing is
            // answered, and the list is shown as it is now.
            _ if press.set != now.set || press.set != shown.set => {
                (texts.stale(members.len()), View::List)
            }
            DigestAction::AllowAll => (texts.confirm_below(), View::Confirm { allow: true }),
            DigestAction::DenyAll => (texts.confirm_below(), View::Confirm { allow: false }),
            DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => {
                let allow = press.action == DigestAction::ConfirmAllow;
                let tally = answer_all(pipeline, &now.ids, allow, who).await;
                tracing::info!(chat = %address, answered = tally.answered, "{}: a digest answered all", self.channel());
                (texts.tally(allow, tally), View::List)
            }
        };
        // What is left (or that nothing is) shows at once; the individual copies are
        // updated by their own jobs.
        let members = self.members(address, session).await.map_err(down)?;
        let sheet = if members.is_empty() {
            self.set_shown(address, session, None).await.map_err(down)?;
            Sheet::closed(texts, address, session, &shown.title)
        } else {
            let mut next = Shown::of(shown.message_ref.clone(), &members);
            next.title = texts.title(members.len(), Some(&members[0]));
            self.set_shown(address, session, Some(&next))
                .await
                .map_err(down)?;
            Sheet::of(texts, address, session, &members, view)
        };
        Ok(Tapped {
            toast,
            redraw: Some(sheet),
            message: shown.message_ref,
            _held: Some(held),
        })
    }

    /// Review: posts the first member not yet posted at the place on its own, with its
    /// buttons.
    async fn review<J: ChatJob>(
        &self,
        press: &Press<'_>,
        members: &[Arc<Interaction>],
        texts: Texts,
    ) -> Result<String, Feedback> {
        let store = self.store();
        for (n, i) in members.iter().enumerate() {
            let copies = store.messages(self.channel(), &i.id).await.map_err(down)?;
            if copies.iter().any(|m| m.address == press.address) {
                continue;
            }
            let to = J::target(press.address).ok_or(Feedback::BadButton)?;
            let nonce = crate::interaction::clip(press.message, 64);
            let job = repost_job::<J>(self.channel(), i, to, "review", &nonce);
            store.enqueue(vec![job]).await.map_err(down)?;
            return Ok(texts.reviewing(n + 1, members.len()));
        }
        Ok(texts.all_reviewed())
    }
}

/// A store failure on a digest click: logged; the person is told to try again.
fn down(e: StoreError) -> Feedback {
    tracing::error!(error = %e, "cannot read or record a digest");
    Feedback::StoreDown
}

/// The members of `queue` that, posted one every `pace` from `start` in deadline order,
/// would come less than [`MIN_NOTICE`] before their deadline although alone they would not.
fn late(start: Timestamp, pace: Duration, queue: &[Arc<Interaction>]) -> Vec<Arc<Interaction>> {
    let mut order: Vec<&Arc<Interaction>> = queue.iter().collect();
    order.sort_by_key(|i| (i.deadline, i.created_at));
    let notice = |at: Timestamp| at.checked_add(MIN_NOTICE).unwrap_or(Timestamp::MAX);
    let mut out = Vec::new();
    for (k, i) in order.into_iter().enumerate() {
        let slot = start
            .checked_add(pace.saturating_mul(k.min(u32::MAX as usize) as u32))
            .unwrap_or(Timestamp::MAX);
        if notice(slot) > i.deadline && notice(start) <= i.deadline {
            out.push(i.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::channels::messages::{Pacer, Posted};
    use crate::interaction::InteractionId;
    use crate::outbox::ChannelJob;
    use crate::store::{ChannelMessage, MemoryStore, Store};
    use crate::sync::LockExt;

    #[derive(serde::Serialize, serde::Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum FakeJob {
        Post { to: String },
        Update,
        Voted,
        Digest { to: String, session: String },
    }

    impl ChannelJob for FakeJob {
        fn channel(&self) -> std::borrow::Cow<'static, str> {
            "fake".into()
        }
    }

    impl ChatJob for FakeJob {
        type Target = String;
        const POST: &'static str = "post";

        fn make(todo: crate::channels::plan::Todo<String>) -> Self {
            use crate::channels::plan::Todo;
            match todo {
                Todo::Post(to) => FakeJob::Post { to },
                Todo::Update => FakeJob::Update,
                Todo::Voted => FakeJob::Voted,
                Todo::Digest { to, session } => FakeJob::Digest { to, session },
            }
        }

        fn todo(self) -> crate::channels::plan::Todo<String> {
            use crate::channels::plan::Todo;
            match self {
                FakeJob::Post { to } => Todo::Post(to),
                FakeJob::Update => Todo::Update,
                FakeJob::Voted => Todo::Voted,
                FakeJob::Digest { to, session } => Todo::Digest { to, session },
            }
        }

        fn target(address: &str) -> Option<String> {
            Some(address.into())
        }

        fn address(t: &String) -> String {
            t.clone()
        }
    }

    /// A chat platform posting one message every 3 s, recording what it posted.
    #[derive(Default)]
    struct Slow {
        posted: Mutex<Vec<String>>,
        digests: Mutex<Vec<Sheet>>,
    }

    #[async_trait]
    impl Platform for Slow {
        type Target = String;
        type Job = FakeJob;

        fn channel(&self) -> &'static str {
            "fake"
        }

        fn address(&self, t: &String) -> String {
            t.clone()
        }

        fn texts(&self) -> Texts {
            Texts(crate::present::render::Locale::EnUs)
        }

        fn pace(&self, _address: &str) -> Option<Duration> {
            Some(Duration::from_secs(3))
        }

        async fn post(
            &self,
            i: &Interaction,
            _t: &String,
            _j: &OutboxJob,
        ) -> Result<Posted, Failure> {
            self.posted.locked().push(i.id.to_string());
            Ok(Posted {
                message_ref: i.id.to_string(),
                state: None,
            })
        }

        async fn edit(&self, _i: &Interaction, _m: &ChannelMessage) -> Result<(), Failure> {
            Ok(())
        }

        async fn post_digest(&self, _t: &String, sheet: &Sheet) -> Result<String, Failure> {
            self.digests.locked().push(sheet.clone());
            Ok("digest-1".into())
        }

        async fn edit_digest(&self, _a: &str, _m: &str, sheet: &Sheet) -> Result<Edited, Failure> {
            self.digests.locked().push(sheet.clone());
            Ok(Edited::Done)
        }
    }

    /// `n` requests of `timeout` s from one session, created now, and the skeleton over a
    /// slow platform holding past `after`.
    async fn burst(n: usize, timeout: u64, after: u32) -> (Messages<Slow>, Vec<Arc<Interaction>>) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let now = Timestamp::now();
        let mut all = Vec::new();
        for k in 0..n {
            let i = Arc::new(Interaction {
                session: Some("s-1".into()),
                ..Interaction::pending(
                    InteractionId::parse(&format!("t{k}")).unwrap(),
                    "Bash",
                    serde_json::Map::new(),
                    now.checked_add(jiff::SignedDuration::from_millis(k as i64))
                        .unwrap(),
                    timeout,
                )
            });
            store.create(i.clone(), Default::default()).await.unwrap();
            all.push(i);
        }
        let m = Messages {
            platform: Slow::default(),
            digests: Digests::new(store.clone(), "fake", after, vec!["chat".into()]),
            store,
            pacer: Pacer::off(),
            health: None,
        };
        (m, all)
    }

    fn post_of(i: &Interaction) -> OutboxJob {
        let (from, until) = crate::outbox::created_window(i);
        FakeJob::Post { to: "chat".into() }.plan(i, &["chat"], from, until)
    }

    #[tokio::test]
    async fn a_burst_the_pace_cannot_post_in_time_is_gathered_at_once_and_the_rest_posted() {
        let (m, all) = burst(40, 60, 0).await;
        // The first post weighs the queue: 17 fit before their deadline, 23 are gathered.
        assert_eq!(
            m.post(&post_of(&all[0]), &"chat".into()).await,
            Delivery::Done
        );
        let d = &m.digests;
        let mut gathered = 0;
        for i in &all {
            gathered += usize::from(d.is_held("chat", i).await.unwrap());
        }
        assert_eq!(gathered, 23);
        assert!(!d.is_held("chat", &all[16]).await.unwrap());
        assert!(d.is_held("chat", &all[17]).await.unwrap());
        // Every post job then posts or holds: the gathered ones are never posted alone.
        for i in &all[1..] {
            assert_eq!(m.post(&post_of(i), &"chat".into()).await, Delivery::Done);
        }
        assert_eq!(m.platform.posted.locked().len(), 17);
        // The digest lists all 23.
        let d = m
            .refresh_digest(&"chat".into(), &session_key(&all[0]))
            .await;
        assert_eq!(d, Delivery::Done);
        let sheet = m.platform.digests.locked().last().cloned().unwrap();
        assert!(sheet.title.starts_with("23 requests"), "{}", sheet.title);
    }

    #[tokio::test]
    async fn a_queue_the_pace_keeps_up_with_is_posted_and_digest_after_still_counts() {
        let (m, all) = burst(10, 300, 0).await;
        for i in &all {
            assert_eq!(m.post(&post_of(i), &"chat".into()).await, Delivery::Done);
        }
        assert_eq!(m.platform.posted.locked().len(), 10);
        // Past `digest_after`, held whatever the pace.
        let (m, all) = burst(3, 300, 2).await;
        assert_eq!(
            m.post(&post_of(&all[2]), &"chat".into()).await,
            Delivery::Done
        );
        assert!(m.platform.posted.locked().is_empty());
        assert!(m.digests.is_held("chat", &all[2]).await.unwrap());
    }

    fn pending(n: usize, created: Timestamp, timeout: u64) -> Arc<Interaction> {
        Arc::new(Interaction::pending(
            InteractionId::parse(&format!("t{n}")).unwrap(),
            "Bash",
            serde_json::Map::new(),
            created,
            timeout,
        ))
    }

    #[test]
    fn the_queue_is_late_from_the_first_one_a_pace_would_post_too_late() {
        let now = Timestamp::now();
        let pace = Duration::from_secs(3);
        // 60 of a minute: at one every 3 s with 10 s notice, the first 17 are in time.
        let burst: Vec<_> = (0..60).map(|n| pending(n, now, 60)).collect();
        let late_ones = late(now, pace, &burst);
        assert_eq!(late_ones.len(), 60 - 17);
        // Ten of five minutes are all in time.
        let small: Vec<_> = (0..10).map(|n| pending(n, now, 300)).collect();
        assert!(late(now, pace, &small).is_empty());
        // One whose deadline is too near for anyone is posted all the same: the queue is
        // not what keeps it from being seen.
        let alone = [pending(0, now, 5)];
        assert!(late(now, pace, &alone).is_empty());
        // A place paused for a minute: everything of a minute is late.
        let paused = now.checked_add(Duration::from_secs(55)).unwrap();
        assert!(
            late(paused, pace, &small).is_empty(),
            "five minutes is still time"
        );
        assert_eq!(
            late(paused, pace, &burst[..3]).len(),
            0,
            "alone they are late too"
        );
    }
}
