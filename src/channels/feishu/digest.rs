//! Feishu's digests (see [`crate::channels::digest`]): one card per session for a receiver
//! with many interactions pending — its title, a line for each of the first few, and Review,
//! Approve all and Deny all — kept up to date by `digest` jobs, and the clicks on it. A click
//! is answered with the card as it now is (the confirmation, the list after an "all"
//! answer), which replaces the clicked one at once.
//!
//! A button's value: `{"imrelay": "digest", "to", "session", "action", "set", "mac"}`, the
//! MAC (the channel's button secret) over the receiver, the session key, the action and the
//! fingerprint of the listed interactions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::CHANNEL;
use super::api::send_uuid;
use super::deliver::{Deliverer, failure};
use super::plan::{digest_job, first_post, receivers_of, review_job};
use super::render::{self, Cards};
use super::settings::Receiver;
use crate::channels::digest::{
    DigestAction, Shown, Tapper, Texts, admit_tapper, answer_all, session_key,
};
use crate::channels::messages::Failure;
use crate::channels::pipeline::Feedback;
use crate::channels::token::Signer;
use crate::interaction::{Interaction, Responder};
use crate::outbox::Delivery;
use crate::store::{OutboxJob, StoreError};

/// The domain of the MAC over a digest button's value.
const DOMAIN: &[u8] = b"imrelay/feishu/digest/v1";
const MAC_BYTES: usize = 16;

/// What a digest card shows: the list, or the confirmation of an "all" answer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    List,
    Confirm { allow: bool },
}

/// Whether a button value is a digest button's.
pub(crate) fn is_digest_value(value: &Value) -> bool {
    value["imrelay"] == "digest"
}

fn mac(cards: &Cards, to: &str, session: &str, action: DigestAction, set: &str) -> String {
    let code = action.code().to_string();
    Signer::new(cards.secret().to_vec()).tag(
        DOMAIN,
        &[
            to.as_bytes(),
            session.as_bytes(),
            code.as_bytes(),
            set.as_bytes(),
        ],
        MAC_BYTES,
    )
}

/// The receiver, session key, action and fingerprint a digest button value carries, if its
/// MAC checks out.
fn read_value(cards: &Cards, value: &Value) -> Option<(String, String, DigestAction, String)> {
    let to = value["to"].as_str()?;
    let session = value["session"].as_str()?;
    let action = DigestAction::from_code(value["action"].as_str()?.chars().next()?)?;
    let set = value["set"].as_str()?;
    let given = value["mac"].as_str()?;
    let code = action.code().to_string();
    let ok = Signer::new(cards.secret().to_vec()).verify(
        DOMAIN,
        &[
            to.as_bytes(),
            session.as_bytes(),
            code.as_bytes(),
            set.as_bytes(),
        ],
        MAC_BYTES,
        given,
    );
    ok.then(|| (to.into(), session.into(), action, set.into()))
}

/// A digest button's name in the card.
fn name(a: DigestAction) -> &'static str {
    match a {
        DigestAction::Review => "digest_review",
        DigestAction::AllowAll => "digest_approve_all",
        DigestAction::DenyAll => "digest_deny_all",
        DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => "digest_confirm",
        DigestAction::Cancel => "digest_cancel",
    }
}

/// The card of the digest of `members` (not empty) for receiver `to`.
pub(crate) fn card(
    cards: &Cards,
    to: &str,
    session: &str,
    members: &[Arc<Interaction>],
    view: View,
) -> Value {
    let texts = Texts(cards.locale());
    let set = Shown::of(None, members).set;
    let title = texts.title(members.len(), members.first().map(|i| i.as_ref()));
    let (lines, more) = texts.lines(members);
    let mut list: Vec<String> = lines.iter().map(|l| format!("• {l}")).collect();
    if more > 0 {
        list.push(texts.more(more));
    }
    let mut elements = vec![json!({"tag": "div", "text": plain(list.join("\n"))})];
    let button = |label: &str, a: DigestAction, kind: &str| {
        json!({
            "tag": "button",
            "name": name(a),
            "text": plain(label),
            "type": kind,
            "behaviors": [{"type": "callback", "value": {
                "imrelay": "digest",
                "to": to,
                "session": session,
                "action": a.code().to_string(),
                "set": set,
                "mac": mac(cards, to, session, a, &set),
            }}],
        })
    };
    let buttons = match view {
        View::List => {
            let [review, allow, deny] = texts.buttons();
            vec![
                button(review, DigestAction::Review, "default"),
                button(allow, DigestAction::AllowAll, "primary_filled"),
                button(deny, DigestAction::DenyAll, "danger"),
            ]
        }
        View::Confirm { allow } => {
            elements.push(json!({"tag": "div", "text": plain(texts.confirm(allow, members))}));
            let [yes, cancel] = texts.confirm_buttons(allow, members.len());
            let (confirm, kind) = if allow {
                (DigestAction::ConfirmAllow, "primary_filled")
            } else {
                (DigestAction::ConfirmDeny, "danger")
            };
            vec![
                button(&yes, confirm, kind),
                button(&cancel, DigestAction::Cancel, "default"),
            ]
        }
    };
    let columns: Vec<Value> = buttons
        .into_iter()
        .map(|b| json!({"tag": "column", "width": "auto", "elements": [b]}))
        .collect();
    elements.push(json!({
        "tag": "column_set",
        "flex_mode": "none",
        "horizontal_spacing": "8px",
        "columns": columns,
    }));
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": title}},
        "header": {"title": plain(title.clone()), "template": "orange"},
        "body": {"elements": elements},
    })
}

/// The card of a digest whose requests were all answered.
fn done_card(cards: &Cards, title: &str) -> Value {
    let text = Texts(cards.locale()).done(title);
    json!({
        "schema": "2.0",
        "config": {"update_multi": true, "summary": {"content": text}},
        "header": {"title": plain(text.clone()), "template": "grey"},
        "body": {"elements": []},
    })
}

fn plain(content: impl Into<String>) -> Value {
    json!({"tag": "plain_text", "content": crate::present::visible_text(&content.into())})
}

impl Deliverer {
    /// A first post of an interaction to `receiver` held for its digest: the delivery, or
    /// `None` when it is posted as usual.
    pub(crate) async fn hold_for_digest(
        &self,
        job: &OutboxJob,
        receiver: &Receiver,
    ) -> Option<Delivery> {
        let f = &self.0.platform;
        if !f.digests.on() || !first_post(&job.key) {
            return None;
        }
        let id = job.interaction_id.as_ref()?;
        let store = &self.0.store;
        let i = match store.get(id).await {
            Ok(Some(i)) if job.is_for(&i) => i,
            Ok(_) => return None,
            Err(e) => return Some(Delivery::store_retry(e)),
        };
        let address = receiver.address();
        match store.messages(CHANNEL, id).await {
            // Posted already (an earlier attempt): the skeleton brings it up to date.
            Ok(copies) if copies.iter().any(|m| m.address == address) => return None,
            Ok(_) => {}
            Err(e) => return Some(Delivery::store_retry(e)),
        }
        let goes_here = |p: &Interaction| receivers_of(p, &f.receivers).contains(receiver);
        let held = async {
            if !f.digests.should_hold(&i, &address, goes_here).await? {
                return Ok(false);
            }
            f.digests.hold(&i, &address).await?;
            store
                .enqueue(vec![digest_job(&i, receiver, &session_key(&i))])
                .await?;
            Ok::<_, StoreError>(true)
        };
        match held.await {
            Ok(true) => {
                tracing::info!(id = %i.id, receiver = %address, "feishu: held for the session's digest");
                Some(Delivery::Done)
            }
            Ok(false) => None,
            Err(e) => Some(Delivery::store_retry(e)),
        }
    }

    /// A resolved interaction held in digests: their refresh is asked for.
    pub(crate) async fn digests_of_resolved(&self, job: &OutboxJob) -> Result<(), StoreError> {
        let f = &self.0.platform;
        // Also with digests turned off since: the ones still open are closed.
        let Some(id) = job.interaction_id.as_ref() else {
            return Ok(());
        };
        let Some(i) = self.0.store.get(id).await?.filter(|i| job.is_for(i)) else {
            return Ok(());
        };
        let jobs: Vec<_> = f
            .digests
            .held_in(&i)
            .await?
            .iter()
            .filter_map(|a| a.parse::<Receiver>().ok())
            .map(|r| digest_job(&i, &r, &session_key(&i)))
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        self.0.store.enqueue(jobs).await
    }

    /// Delivers a `digest` job: the digest card of `session` for `receiver` shows its members
    /// as they are now (posted when new, updated when they changed, closed when none is left).
    pub(crate) async fn refresh_digest(&self, receiver: &Receiver, session: &str) -> Delivery {
        match self.refresh(receiver, session).await {
            Ok(()) => Delivery::Done,
            Err(f) => f.delivery(),
        }
    }

    async fn refresh(&self, receiver: &Receiver, session: &str) -> Result<(), Failure> {
        let f = &self.0.platform;
        let address = receiver.address();
        let _held = f.digests.lock(&address, session).await;
        let members = f
            .digests
            .members(&address, session)
            .await
            .map_err(Failure::store)?;
        let shown = f
            .digests
            .shown(&address, session)
            .await
            .map_err(Failure::store)?;
        let message = shown.as_ref().and_then(|s| s.message_ref.clone());
        if members.is_empty() {
            if let (Some(s), Some(m)) = (&shown, &message) {
                self.0.pacer.turn(&address).await;
                let closed = f.api.update_card(m, &done_card(&f.cards, &s.title)).await;
                match closed.map_err(failure) {
                    // Never shown closed: forgotten all the same.
                    Ok(()) | Err(Failure::Permanent(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            return f
                .digests
                .set_shown(&address, session, None)
                .await
                .map_err(Failure::store);
        }
        let mut next = Shown::of(None, &members);
        next.title = Texts(f.cards.locale()).title(members.len(), Some(&members[0]));
        if shown.as_ref().is_some_and(|s| s.set == next.set) && message.is_some() {
            return Ok(());
        }
        let card = card(&f.cards, &address, session, &members, View::List);
        self.0.pacer.turn(&address).await;
        let posted = match message {
            Some(m) => {
                f.api.update_card(&m, &card).await.map_err(failure)?;
                m
            }
            None => {
                let uuid = send_uuid(
                    &format!("digest:{session}:{}", members[0].incarnation()),
                    receiver,
                );
                f.api
                    .send_card(receiver, &card, &uuid)
                    .await
                    .map_err(failure)?
            }
        };
        tracing::info!(receiver = %address, message = %posted, members = members.len(), "feishu: digest shown");
        next.message_ref = Some(posted);
        f.digests
            .set_shown(&address, session, Some(&next))
            .await
            .map_err(Failure::store)
    }
}

/// Who clicked, as a digest click is answered.
pub(crate) struct Clicker<'a> {
    /// The clicker's id on the list or among the people, else the id they came with.
    pub by: &'a str,
    /// Whether they are on `feishu.approvers`.
    pub approver: bool,
    /// The event id was seen before (a repeat is not audited again).
    pub again: bool,
}

/// What a click on a digest card needs of the callback handler (which hands it over, so
/// this file does not import the handler that imports it).
pub(crate) struct DigestClicks<'a> {
    /// The shared answer pipeline.
    pub pipeline: &'a crate::channels::pipeline::Pipeline,
    /// The store (the copies a Review posts).
    pub store: &'a dyn crate::store::Store,
    /// The card renderer.
    pub cards: &'a Cards,
    /// The digests of this channel.
    pub digests: &'a crate::channels::digest::Digests,
}

impl DigestClicks<'_> {
    fn reply(&self, feedback: Feedback) -> (Value, &'static str) {
        render::feedback_reply(self.cards, feedback)
    }

    /// A click on a digest card's button: the reply (a toast, and the card as it now is) and
    /// the result it is counted under.
    pub(crate) async fn digest_click(
        &self,
        event: &Value,
        who: Clicker<'_>,
    ) -> (Value, &'static str) {
        let texts = Texts(self.cards.locale());
        let Some((to, session, action, set)) = read_value(self.cards, &event["action"]["value"])
        else {
            if !who.again
                && self
                    .pipeline
                    .registry()
                    .refused(
                        None,
                        who.by,
                        self.pipeline.via(),
                        "digest card data failed its integrity check",
                    )
                    .await
                    .is_err()
            {
                return self.reply(Feedback::StoreDown);
            }
            return self.reply(Feedback::BadButton);
        };
        let tapper = Tapper {
            actor: who.by,
            identity: who.by,
            approver: who.approver,
            responder: Responder::new(who.by, self.pipeline.via().clone())
                .with_identity(CHANNEL, who.by),
        };
        if let Err(f) = admit_tapper(self.pipeline, &tapper).await {
            return self.reply(f);
        }
        let digests = self.digests;
        let _held = digests.lock(&to, &session).await;
        let clicked = event["context"]["open_message_id"]
            .as_str()
            .unwrap_or_default();
        let step = async {
            let Some(shown) = digests.shown(&to, &session).await.map_err(down)? else {
                return Ok((texts.closed(), None));
            };
            if shown.message_ref.as_deref() != Some(clicked) {
                return Err(Feedback::BadButton);
            }
            let members = digests.members(&to, &session).await.map_err(down)?;
            let now = Shown::of(shown.message_ref.clone(), &members);
            let (toast, view) = match action {
                DigestAction::Review => {
                    return self
                        .review(&to, clicked, &members, texts)
                        .await
                        .map(|t| (t, None));
                }
                DigestAction::Cancel => (texts.cancelled(), View::List),
                _ if set != now.set || set != shown.set => (texts.stale(members.len()), View::List),
                DigestAction::AllowAll => (texts.confirm_below(), View::Confirm { allow: true }),
                DigestAction::DenyAll => (texts.confirm_below(), View::Confirm { allow: false }),
                DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => {
                    let allow = action == DigestAction::ConfirmAllow;
                    let tally = answer_all(self.pipeline, &now.ids, allow, &tapper).await;
                    tracing::info!(receiver = %to, answered = tally.answered, "feishu: a digest answered all");
                    (texts.tally(allow, tally), View::List)
                }
            };
            let card = self.digest_card_now(&to, &session, shown, view).await?;
            Ok((toast, Some(card)))
        };
        match step.await {
            Ok((toast, card)) => (render::reply("info", &toast, card), "digest"),
            Err(f) => self.reply(f),
        }
    }

    /// The card of the digest `(to, session)` as it is now, in `view`, recorded as shown
    /// (the caller holds its lock).
    async fn digest_card_now(
        &self,
        to: &str,
        session: &str,
        shown: Shown,
        view: View,
    ) -> Result<Value, Feedback> {
        let digests = self.digests;
        let members = digests.members(to, session).await.map_err(down)?;
        if members.is_empty() {
            digests.set_shown(to, session, None).await.map_err(down)?;
            return Ok(done_card(self.cards, &shown.title));
        }
        let mut next = Shown::of(shown.message_ref, &members);
        next.title = Texts(self.cards.locale()).title(members.len(), Some(&members[0]));
        digests
            .set_shown(to, session, Some(&next))
            .await
            .map_err(down)?;
        Ok(card(self.cards, to, session, &members, view))
    }

    /// Review: posts the first member not yet posted to `to` on its own, with its buttons.
    async fn review(
        &self,
        to: &str,
        clicked: &str,
        members: &[Arc<Interaction>],
        texts: Texts,
    ) -> Result<String, Feedback> {
        let Ok(receiver) = to.parse::<Receiver>() else {
            return Err(Feedback::BadButton);
        };
        for (n, i) in members.iter().enumerate() {
            let copies = self.store.messages(CHANNEL, &i.id).await.map_err(down)?;
            if copies.iter().any(|m| m.address == to) {
                continue;
            }
            let nonce = crate::interaction::clip(clicked, 64);
            self.store
                .enqueue(vec![review_job(i, &receiver, &nonce)])
                .await
                .map_err(down)?;
            return Ok(texts.reviewing(n + 1, members.len()));
        }
        Ok(texts.all_reviewed())
    }
}

/// A store failure on a digest click: logged; the person is told to try again.
fn down(e: StoreError) -> Feedback {
    tracing::error!(error = %e, "feishu: cannot read or record a digest");
    Feedback::StoreDown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interaction::InteractionId;
    use crate::present::render::Locale;

    #[test]
    fn digest_buttons_verify_only_as_signed() {
        let cards = Cards::new(Locale::EnUs, vec![7; 32]);
        let i = Arc::new(Interaction::pending(
            InteractionId::parse("toolu_1").unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        ));
        let card = card(&cards, "chat_id:oc_1", "LMbAeCb6pWs", &[i], View::List);
        let mut values = Vec::new();
        for col in card["body"]["elements"][1]["columns"].as_array().unwrap() {
            values.push(col["elements"][0]["behaviors"][0]["value"].clone());
        }
        assert_eq!(values.len(), 3);
        let approve = &values[1];
        assert!(is_digest_value(approve));
        let (to, _, action, _) = read_value(&cards, approve).unwrap();
        assert_eq!(
            (to.as_str(), action),
            ("chat_id:oc_1", DigestAction::AllowAll)
        );
        for (field, forged) in [
            ("action", "A"),
            ("to", "chat_id:oc_2"),
            ("set", "AAAAAAAAAAA"),
        ] {
            let mut v = approve.clone();
            v[field] = json!(forged);
            assert!(read_value(&cards, &v).is_none(), "{field}");
        }
        assert!(read_value(&Cards::new(Locale::EnUs, vec![8; 32]), approve).is_none());
    }
}
