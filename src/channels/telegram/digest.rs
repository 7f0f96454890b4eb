//! Telegram's digests (see [`crate::channels::digest`]): one message per session in a chat
//! with many interactions pending — its title, a line for each of the first few, and Review,
//! Approve all and Deny all — kept up to date by `digest` jobs, and the taps on it.
//!
//! Its buttons' `callback_data` (46 ASCII bytes, within Telegram's 64):
//!
//! ```text
//! D  a  sssssssssss  fffffffffff  mmmmmmmmmmmmmmmmmmmmmm
//! │  │  │            │            └ MAC: 16 bytes of HMAC-SHA256 (the channel's button
//! │  │  │            │              secret) over the chat, the session key, the action
//! │  │  │            │              and the fingerprint, base64url
//! │  │  │            └ fingerprint of the listed interactions (`digest::fingerprint`)
//! │  │  └ the session's digest key (`digest::session_key`)
//! │  └ action (`DigestAction::code`)
//! └ format: a digest button (an interaction's button starts with its version, `1`)
//! ```

use std::sync::Arc;

use teloxide::types::{CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup};

use super::api::Edited;
use super::deliver::{failure, nonce_free};
use super::plan::{chats_of, digest_job, post_job};
use super::render::escape;
use super::{CHANNEL, Telegram, actor, responder};
use crate::channels::digest::{
    DigestAction, Shown, Tapper, Texts, admit_tapper, answer_all, session_key,
};
use crate::channels::messages::Failure;
use crate::channels::pipeline::Feedback;
use crate::channels::token::Signer;
use crate::interaction::Interaction;
use crate::outbox::Delivery;
use crate::present::render::Locale;
use crate::store::{OutboxJob, StoreError};

/// The first byte of a digest button's data.
const FORMAT: char = 'D';
/// The domain of the MAC over a digest button.
const DOMAIN: &[u8] = b"imrelay/telegram/digest/v1";
const MAC_BYTES: usize = 16;
const KEY_LEN: usize = 11;
/// Length of a digest button's data, in bytes.
const DATA_LEN: usize = 2 + KEY_LEN + KEY_LEN + 22;
/// Telegram's texts are in English.
const TEXTS: Texts = Texts(Locale::EnUs);

/// Whether callback `data` is a digest button's.
pub(super) fn is_digest_data(data: &str) -> bool {
    data.starts_with(FORMAT)
}

/// What a digest message shows: the list, or the confirmation of an "all" answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum View {
    List,
    Confirm { allow: bool },
}

/// The callback data of digest button `action` in `chat` for `session`'s digest listing the
/// set `set`, signed by `signer`.
fn encode(signer: &Signer, chat: i64, session: &str, action: DigestAction, set: &str) -> String {
    let signed = format!("{FORMAT}{}{session}{set}", action.code());
    let chat = chat.to_string();
    let mac = signer.tag(DOMAIN, &[chat.as_bytes(), signed.as_bytes()], MAC_BYTES);
    format!("{signed}{mac}")
}

/// The session key, action and fingerprint `data` carries, if its MAC checks out for `chat`
/// (in constant time).
fn decode(signer: &Signer, chat: i64, data: &str) -> Option<(String, DigestAction, String)> {
    if data.len() != DATA_LEN || !data.is_ascii() {
        return None;
    }
    let (signed, mac) = data.split_at(DATA_LEN - 22);
    let chat_text = chat.to_string();
    if !signer.verify(
        DOMAIN,
        &[chat_text.as_bytes(), signed.as_bytes()],
        MAC_BYTES,
        mac,
    ) {
        return None;
    }
    let action = DigestAction::from_code(signed[1..2].chars().next()?)?;
    let session = signed[2..2 + KEY_LEN].to_string();
    let set = signed[2 + KEY_LEN..].to_string();
    Some((session, action, set))
}

impl Telegram {
    fn digest_data(&self, chat: i64, session: &str, action: DigestAction, set: &str) -> String {
        encode(self.codec.signer(), chat, session, action, set)
    }

    fn read_digest_data(&self, chat: i64, data: &str) -> Option<(String, DigestAction, String)> {
        decode(self.codec.signer(), chat, data)
    }

    /// The text and keyboard of the digest of `members` (not empty) in `chat`.
    fn digest_message(
        &self,
        chat: i64,
        session: &str,
        members: &[Arc<Interaction>],
        view: View,
    ) -> (String, InlineKeyboardMarkup) {
        let set = Shown::of(None, members).set;
        let mut text = format!(
            "<b>{}</b>",
            escape(&TEXTS.title(members.len(), members.first().map(|i| i.as_ref())))
        );
        let (lines, more) = TEXTS.lines(members);
        for l in lines {
            text.push_str(&format!("\n• {}", escape(&l)));
        }
        if more > 0 {
            text.push_str(&format!("\n{}", escape(&TEXTS.more(more))));
        }
        let button = |label: &str, a: DigestAction| {
            InlineKeyboardButton::callback(
                label.to_string(),
                self.digest_data(chat, session, a, &set),
            )
        };
        let rows = match view {
            View::List => {
                let [review, allow, deny] = TEXTS.buttons();
                vec![
                    vec![button(review, DigestAction::Review)],
                    vec![
                        button(allow, DigestAction::AllowAll),
                        button(deny, DigestAction::DenyAll),
                    ],
                ]
            }
            View::Confirm { allow } => {
                text.push_str(&format!("\n\n{}", escape(&TEXTS.confirm(allow, members))));
                let [yes, cancel] = TEXTS.confirm_buttons(allow, members.len());
                let confirm = if allow {
                    DigestAction::ConfirmAllow
                } else {
                    DigestAction::ConfirmDeny
                };
                vec![vec![
                    button(&yes, confirm),
                    button(&cancel, DigestAction::Cancel),
                ]]
            }
        };
        (text, InlineKeyboardMarkup::new(rows))
    }

    /// A first post of an interaction to `chat` held for the chat's digest: the delivery, or
    /// `None` when it is posted as usual.
    pub(super) async fn hold_for_digest(&self, job: &OutboxJob, chat: i64) -> Option<Delivery> {
        if !self.digests.on() || !nonce_free(&job.key) {
            return None;
        }
        let id = job.interaction_id.as_ref()?;
        let i = match self.store.get(id).await {
            Ok(Some(i)) if job.is_for(&i) => i,
            Ok(_) => return None,
            Err(e) => return Some(Delivery::store_retry(e)),
        };
        let address = chat.to_string();
        match self.store.messages(CHANNEL, id).await {
            // Posted already (an earlier attempt): the skeleton brings it up to date.
            Ok(copies) if copies.iter().any(|m| m.address == address) => return None,
            Ok(_) => {}
            Err(e) => return Some(Delivery::store_retry(e)),
        }
        let goes_here = |p: &Interaction| chats_of(p, &self.settings.chats).contains(&chat);
        let held = async {
            if !self.digests.should_hold(&i, &address, goes_here).await? {
                return Ok(false);
            }
            self.digests.hold(&i, &address).await?;
            self.store
                .enqueue(vec![digest_job(&i, chat, &session_key(&i))])
                .await?;
            Ok::<_, StoreError>(true)
        };
        match held.await {
            Ok(true) => {
                tracing::info!(id = %i.id, chat, "telegram: held for the session's digest");
                Some(Delivery::Done)
            }
            Ok(false) => None,
            Err(e) => Some(Delivery::store_retry(e)),
        }
    }

    /// A resolved interaction held in digests: their refresh is asked for.
    pub(super) async fn digests_of_resolved(&self, job: &OutboxJob) -> Result<(), StoreError> {
        // Also with digests turned off since: the ones still open are closed.
        let Some(id) = job.interaction_id.as_ref() else {
            return Ok(());
        };
        let Some(i) = self.store.get(id).await?.filter(|i| job.is_for(i)) else {
            return Ok(());
        };
        let jobs: Vec<_> = self
            .digests
            .held_in(&i)
            .await?
            .iter()
            .filter_map(|a| a.parse::<i64>().ok())
            .map(|chat| digest_job(&i, chat, &session_key(&i)))
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        self.store.enqueue(jobs).await
    }

    /// Delivers a `digest` job: the digest of `session` in `chat` shows its members as they
    /// are now (posted when new, edited when they changed, closed when none is left).
    pub(super) async fn refresh_digest(&self, chat: i64, session: &str) -> Delivery {
        let address = chat.to_string();
        let _held = self.digests.lock(&address, session).await;
        match self.show_digest(chat, session, View::List, false).await {
            Ok(()) => Delivery::Done,
            Err(f) => f.delivery(),
        }
    }

    /// Shows the digest of `session` in `chat` in `view` (the caller holds its lock): posts,
    /// edits when its members changed (or always, with `force`), or closes it.
    async fn show_digest(
        &self,
        chat: i64,
        session: &str,
        view: View,
        force: bool,
    ) -> Result<(), Failure> {
        let address = chat.to_string();
        let members = self
            .digests
            .members(&address, session)
            .await
            .map_err(Failure::store)?;
        let shown = self
            .digests
            .shown(&address, session)
            .await
            .map_err(Failure::store)?;
        let message = shown
            .as_ref()
            .and_then(|s| s.message_ref.as_deref())
            .and_then(|m| m.parse::<i32>().ok());
        if members.is_empty() {
            if let (Some(s), Some(m)) = (&shown, message) {
                let text = format!("<b>{}</b>", escape(&TEXTS.done(&s.title)));
                match self.client.edit(chat, m, text, None).await.map_err(failure) {
                    // Never shown closed: forgotten all the same.
                    Ok(_) | Err(Failure::Permanent(_)) => {}
                    Err(f) => return Err(f),
                }
            }
            return self
                .digests
                .set_shown(&address, session, None)
                .await
                .map_err(Failure::store);
        }
        let mut next = Shown::of(None, &members);
        next.title = TEXTS.title(members.len(), Some(&members[0]));
        if !force && shown.as_ref().is_some_and(|s| s.set == next.set) && message.is_some() {
            return Ok(());
        }
        let (text, keyboard) = self.digest_message(chat, session, &members, view);
        let posted = match message {
            Some(m) => match self
                .client
                .edit(chat, m, text.clone(), Some(keyboard.clone()))
                .await
                .map_err(failure)?
            {
                Edited::Done => m,
                // Deleted in the chat: a new one is posted.
                Edited::Gone(_) => self
                    .client
                    .send(chat, text, Some(keyboard), None)
                    .await
                    .map_err(failure)?,
            },
            None => {
                self.post_digest(chat, session, &members[0], text, keyboard)
                    .await?
            }
        };
        next.message_ref = Some(posted.to_string());
        tracing::info!(
            chat,
            message = posted,
            members = members.len(),
            "telegram: digest shown"
        );
        self.digests
            .set_shown(&address, session, Some(&next))
            .await
            .map_err(Failure::store)
    }

    /// Posts a new digest message, once across replicas: another process posting the same
    /// digest makes this a retry, which then finds its message and edits it.
    async fn post_digest(
        &self,
        chat: i64,
        session: &str,
        first: &Interaction,
        text: String,
        keyboard: InlineKeyboardMarkup,
    ) -> Result<i32, Failure> {
        let address = chat.to_string();
        let claimed = self.digests.claim_post(&address, session, first).await;
        if !claimed.map_err(Failure::store)? {
            return Err(Failure::Transient(
                "another process is posting this digest".into(),
            ));
        }
        let sent = self.client.send(chat, text, Some(keyboard), None).await;
        if sent.is_err()
            && let Err(e) = self.digests.release_post(&address, session, first).await
        {
            tracing::warn!(chat, error = %e, "telegram: could not release a digest's post");
        }
        sent.map_err(failure)
    }

    /// A tap on a digest button.
    pub(super) async fn on_digest_tap(&self, q: &CallbackQuery) {
        let say = |f: Feedback| f.text(Locale::EnUs);
        let data = q.data.as_deref().unwrap_or("");
        let Some((chat, message)) = q.message.as_ref().map(|m| (m.chat().id.0, m.id().0)) else {
            self.client.answer(&q.id, &say(Feedback::BadButton)).await;
            return;
        };
        let Some((session, action, set)) = self.read_digest_data(chat, data) else {
            let told = self
                .refuse(
                    None,
                    &q.from,
                    "digest button data failed its check",
                    "bad_data",
                    Feedback::BadButton,
                )
                .await;
            self.client.answer(&q.id, &say(told)).await;
            return;
        };
        let (who, identity) = (actor(&q.from), q.from.id.0.to_string());
        let tapper = Tapper {
            actor: &who,
            identity: &identity,
            approver: self.is_approver(&q.from),
            responder: responder(&q.from),
        };
        if let Err(f) = admit_tapper(&self.pipeline, &tapper).await {
            self.count_refused("not_approver");
            self.client.answer(&q.id, &say(f)).await;
            return;
        }
        let address = chat.to_string();
        let _held = self.digests.lock(&address, &session).await;
        let toast = match self
            .digest_tap(chat, message, &session, action, &set, &tapper)
            .await
        {
            Ok(t) => t,
            Err(f) => say(f),
        };
        self.client.answer(&q.id, &toast).await;
    }

    /// What a verified tap on the digest of `session` in `chat` does (the caller holds its
    /// lock); returns the toast.
    async fn digest_tap(
        &self,
        chat: i64,
        message: i32,
        session: &str,
        action: DigestAction,
        set: &str,
        tapper: &Tapper<'_>,
    ) -> Result<String, Feedback> {
        let address = chat.to_string();
        let store_down = |e: StoreError| {
            tracing::error!(error = %e, "telegram: cannot read a digest");
            Feedback::StoreDown
        };
        let Some(shown) = self
            .digests
            .shown(&address, session)
            .await
            .map_err(store_down)?
        else {
            return Ok(TEXTS.closed());
        };
        if shown.message_ref.as_deref() != Some(message.to_string().as_str()) {
            return Err(Feedback::BadButton);
        }
        let members = self
            .digests
            .members(&address, session)
            .await
            .map_err(store_down)?;
        let now = Shown::of(None, &members);
        let shows = |view, force| self.show_digest(chat, session, view, force);
        let outcome = match action {
            DigestAction::Review => return self.review(chat, message, &members).await,
            DigestAction::Cancel => shows(View::List, true).await.map(|()| TEXTS.cancelled()),
            // The list changed since it was shown (or since this confirmation): nothing is
            // answered, and the list is shown as it is now.
            _ if set != now.set || set != shown.set => shows(View::List, true)
                .await
                .map(|()| TEXTS.stale(members.len())),
            DigestAction::AllowAll | DigestAction::DenyAll => {
                let allow = action == DigestAction::AllowAll;
                shows(View::Confirm { allow }, true)
                    .await
                    .map(|()| TEXTS.confirm_below())
            }
            DigestAction::ConfirmAllow | DigestAction::ConfirmDeny => {
                let allow = action == DigestAction::ConfirmAllow;
                let tally = answer_all(&self.pipeline, &now.ids, allow, tapper).await;
                tracing::info!(
                    chat,
                    answered = tally.answered,
                    "telegram: a digest answered all"
                );
                let toast = TEXTS.tally(allow, tally);
                // What is left (or that nothing is) shows at once; the individual copies are
                // updated by their own jobs.
                return Ok(match shows(View::List, false).await {
                    Ok(()) => toast,
                    Err(f) => {
                        tracing::warn!(chat, error = %f.error(), "telegram: could not update a digest");
                        toast
                    }
                });
            }
        };
        outcome.map_err(|f| {
            tracing::warn!(chat, error = %f.error(), "telegram: could not update a digest");
            Feedback::StoreDown
        })
    }

    /// Review: posts the first member not yet posted in `chat` on its own, with its buttons.
    async fn review(
        &self,
        chat: i64,
        message: i32,
        members: &[Arc<Interaction>],
    ) -> Result<String, Feedback> {
        let address = chat.to_string();
        for (n, i) in members.iter().enumerate() {
            let copies = self
                .store
                .messages(CHANNEL, &i.id)
                .await
                .map_err(|_| Feedback::StoreDown)?;
            if copies.iter().any(|m| m.address == address) {
                continue;
            }
            let job = post_job(i, chat, Some(&format!("review-{message}")));
            self.store
                .enqueue(vec![job])
                .await
                .map_err(|_| Feedback::StoreDown)?;
            return Ok(TEXTS.reviewing(n + 1, members.len()));
        }
        Ok(TEXTS.all_reviewed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_data_fits_telegram_and_is_bound_to_its_chat_and_contents() {
        let s = Signer::new(vec![7; 32]);
        let (session, set) = ("LMbAeCb6pWs", "JUwBfpYx09o");
        let data = encode(&s, -2001, session, DigestAction::ConfirmAllow, set);
        assert_eq!(data.len(), DATA_LEN);
        assert!(data.len() <= 64 && is_digest_data(&data));
        assert_eq!(
            decode(&s, -2001, &data),
            Some((session.into(), DigestAction::ConfirmAllow, set.into()))
        );
        assert_eq!(decode(&s, 1001, &data), None, "another chat");
        assert_eq!(
            decode(&Signer::new(vec![8; 32]), -2001, &data),
            None,
            "another key"
        );
        let deny = format!("DD{}", &data[2..]);
        assert_eq!(decode(&s, -2001, &deny), None, "another action");
        let mut swapped = data.clone();
        swapped.replace_range(13..24, "AAAAAAAAAAA");
        assert_eq!(decode(&s, -2001, &swapped), None, "another set");
        assert_eq!(decode(&s, -2001, &data[..DATA_LEN - 1]), None);
    }
}
