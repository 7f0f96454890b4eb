//! A reaction on a Matrix digest: ✅ Approve all and ❌ Deny all (each asks to confirm, in a
//! message of its own under the digest), 👀 Review (the next member posted on its own); and
//! ✅ (yes) or ❌ (cancel) on that confirmation. The kit's digest flow
//! (`channels::digest_flow`) does the rest, as for every channel: the approver checks, a
//! confirmation bound to the set it listed (a set changed since is refused as stale and the
//! list shown as it now is), each member answered on its own.
//!
//! A reaction carries nothing but the event it is on. Each digest and confirmation the bot
//! posts is marked by its event id (`deliver::digest_key`, `deliver::confirmation_key`, a
//! value bound to its first member), so a reaction on anything else costs one read or two,
//! and is never fetched. A digest is then what the kit shows at the room (or the direct
//! room with the person reacting) under that member's session; a confirmation carries what
//! it confirms in its own content (`org.imrelay.digest`), read back from the homeserver once
//! the reaction is taken (`Inbound::taken_once`), and only from the bot's own event (the
//! homeserver names the sender; nobody else can post as the bot).

use serde_json::{Value, json};

use super::Job;
use super::deliver::{confirmation_key, digest_key, formatted, txn};
use super::inbound::{Heard, Inbound, Said};
use crate::channels::digest::{DigestAction, Sheet, Tapper, session_key};
use crate::channels::digest_flow::{Press, Tapped};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::Platform;
use crate::channels::pipeline::Feedback;
use crate::interaction::InteractionId;

/// The content key of a confirmation: what it confirms.
const CONFIRMS: &str = "org.imrelay.digest";

/// What a reaction on a digest (or on its confirmation) asks.
struct On {
    /// The digest's place (a room id, or the user id of a direct room).
    address: String,
    /// The session's digest key.
    session: String,
    /// The set the reaction answers: what the digest lists now, or what the confirmation
    /// listed.
    set: String,
    /// The digest message.
    digest: String,
    /// The confirmation it is on, if it is on one.
    confirmation: Option<String>,
    /// What it does.
    action: DigestAction,
}

/// What a reaction was found on, before anything is fetched.
enum Found {
    /// A live digest.
    Digest(On),
    /// A confirmation the bot posted: what it confirms is in its content.
    Confirmation,
}

impl Inbound {
    /// Takes reaction `h` through the kit's digest flow when it is on a digest or a digest's
    /// confirmation (`me`: the bot); anything else is left alone. The event is taken once
    /// before a confirmation is fetched.
    pub(super) async fn digest_reaction(&self, h: &Heard, me: &str) {
        let Some(found) = self.found(h).await else {
            return;
        };
        if !self.taken_once(h).await {
            return;
        }
        let on = match found {
            Found::Digest(on) => on,
            Found::Confirmation => match self.confirmation(h, me).await {
                Some(on) => on,
                None => return,
            },
        };
        let responder = self.responder(&h.sender);
        let actor = responder.audit_actor().unwrap_or_default();
        let who = Tapper {
            actor: &actor,
            identity: &h.sender,
            approver: self.settings.is_approver(&h.sender),
            responder,
        };
        let press = Press {
            address: &on.address,
            session: &on.session,
            action: on.action,
            set: &on.set,
            message: &on.digest,
        };
        let texts = Texts(self.render.locale);
        match self
            .digests
            .tap::<Job>(&self.pipeline, texts, &press, &who)
            .await
        {
            Ok(tapped) => self.shown(h, &on, tapped).await,
            Err(f) => self.tell(h, &f.text(self.render.locale)).await,
        }
    }

    /// The first member bound to event `event` under `key`, if the bot marked it so.
    async fn marked(&self, key: fn(&str) -> String, event: &str) -> Option<InteractionId> {
        let id = self.store.get_value(&key(event)).await.ok()??;
        InteractionId::parse(&id).ok()
    }

    /// What reaction `h` is on, when it is a digest or a confirmation the bot posted, found
    /// by the marks the bot left (a reaction that means nothing there costs no read).
    async fn found(&self, h: &Heard) -> Option<Found> {
        let action = match h.said {
            Said::Allow => DigestAction::AllowAll,
            Said::Deny => DigestAction::DenyAll,
            Said::Review => DigestAction::Review,
            Said::Similar | Said::Reply(_) => return None,
        };
        let Some(first) = self.marked(digest_key, &h.prompt).await else {
            let confirms = action != DigestAction::Review;
            return (confirms && self.marked(confirmation_key, &h.prompt).await.is_some())
                .then_some(Found::Confirmation);
        };
        let member = self.store.get(&first).await.ok()??;
        let session = session_key(&member);
        // A digest in the room, or in the direct room with the person reacting.
        for address in [h.room.as_str(), h.sender.as_str()] {
            let Ok(Some(shown)) = self.digests.shown(address, &session).await else {
                continue;
            };
            if shown.message_ref.as_deref() == Some(h.prompt.as_str()) {
                return Some(Found::Digest(On {
                    address: address.to_string(),
                    session,
                    set: shown.set,
                    digest: h.prompt.clone(),
                    confirmation: None,
                    action,
                }));
            }
        }
        None
    }

    /// What confirmation `h` is on confirms, read from the bot's (`me`) event.
    async fn confirmation(&self, h: &Heard, me: &str) -> Option<On> {
        let (room, event) = (h.room.as_str(), h.prompt.as_str());
        let e: Value = self
            .session
            .call(|c, t| async move { c.event(room, event, t).await })
            .await
            .ok()?;
        if e["sender"] != me {
            return None;
        }
        let c = &e["content"][CONFIRMS];
        let allow = c["allow"].as_bool()?;
        let action = match (&h.said, allow) {
            (Said::Allow, true) => DigestAction::ConfirmAllow,
            (Said::Allow, false) => DigestAction::ConfirmDeny,
            (Said::Deny, _) => DigestAction::Cancel,
            _ => return None,
        };
        Some(On {
            address: c["address"].as_str()?.to_string(),
            session: c["session"].as_str()?.to_string(),
            set: c["set"].as_str()?.to_string(),
            digest: c["digest"].as_str()?.to_string(),
            confirmation: Some(h.prompt.clone()),
            action,
        })
    }

    /// Shows what a reaction did: Approve all or Deny all posts its confirmation; otherwise
    /// the digest shows the list as it now is, and the confirmation (or a notice to the
    /// person) says what became of it. The digest stays locked until then (`tapped`).
    async fn shown(&self, h: &Heard, on: &On, tapped: Tapped) {
        let locale = self.render.locale;
        if let Some(sheet) = tapped.redraw.as_ref().filter(|s| s.question.is_some())
            && on.confirmation.is_none()
        {
            if let Err(f) = self.confirm(on, sheet).await {
                tracing::warn!(room = %h.room, error = %f.error(), "matrix: cannot post a digest's confirmation");
                self.tell(h, &Feedback::StoreDown.text(locale)).await;
            }
            return;
        }
        if let Some(sheet) = &tapped.redraw
            && let Err(f) = self
                .matrix
                .edit_digest(&on.address, &on.digest, sheet)
                .await
        {
            tracing::warn!(room = %h.room, error = %f.error(), "matrix: could not update a digest");
        }
        let Some(c) = &on.confirmation else {
            return self.tell(h, &tapped.toast).await;
        };
        let text = self.render.plain(&tapped.toast);
        let id = txn(&["digest-confirmed", c]);
        if let Err(f) = self.matrix.replace_with(&h.room, c, &text, &id).await {
            tracing::warn!(room = %h.room, error = %f.error(), "matrix: could not update a digest's confirmation");
            self.tell(h, &tapped.toast).await;
        }
    }

    /// Posts the confirmation `sheet` (the confirming view) of digest `on`, in reply to it,
    /// carrying what it confirms.
    async fn confirm(
        &self,
        on: &On,
        sheet: &Sheet,
    ) -> Result<String, crate::channels::messages::Failure> {
        let encode = |e: serde_json::Error| {
            crate::channels::messages::Failure::Permanent(format!(
                "cannot encode a confirmation: {e}"
            ))
        };
        let mut content =
            serde_json::to_value(formatted(&self.render.confirmation(sheet))).map_err(encode)?;
        content[CONFIRMS] = json!({
            "address": on.address,
            "session": on.session,
            "set": sheet.set,
            "allow": on.action == DigestAction::AllowAll,
            "digest": on.digest,
        });
        content["m.relates_to"] = json!({"m.in_reply_to": {"event_id": on.digest}});
        let parts = [
            "digest-confirm",
            &on.digest,
            &sheet.set,
            &on.action.code().to_string(),
        ];
        let event = self
            .matrix
            .post_content(&on.address, content, &parts)
            .await?;
        self.matrix.mark(confirmation_key, &event, sheet).await?;
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::channels::digest::Shown;
    use crate::channels::matrix::fake::{self, ALICE, BOT, ROOM};
    use crate::interaction::Interaction;

    /// Alice's reaction `key` (as read) on event `on`, itself event `id`.
    fn reaction(id: &str, on: &str, said: Said) -> Heard {
        Heard {
            room: ROOM.into(),
            event_id: id.into(),
            sender: ALICE.into(),
            prompt: on.into(),
            root: None,
            said,
        }
    }

    /// A pending approval, stored.
    async fn member(inbound: &Inbound, id: &str) -> Arc<Interaction> {
        let i = Arc::new(Interaction::pending(
            InteractionId::parse(id).unwrap(),
            "Bash",
            serde_json::Map::new(),
            jiff::Timestamp::now(),
            300,
        ));
        inbound
            .store
            .create(i.clone(), Default::default())
            .await
            .unwrap();
        i
    }

    #[tokio::test]
    async fn a_reaction_on_an_event_the_bot_did_not_mark_is_neither_fetched_nor_taken() {
        let (hs, _, inbound) = fake::channel().await;
        // Many live digests in the room: none is read to find out.
        for n in 0..50 {
            let shown = Shown {
                message_ref: Some(format!("$digest{n}:fake")),
                ..Shown::default()
            };
            let session = format!("s{n}");
            inbound
                .digests
                .set_shown(ROOM, &session, Some(&shown))
                .await
                .unwrap();
        }
        for said in [Said::Allow, Said::Deny, Said::Review, Said::Similar] {
            let h = reaction("$r1:fake", "$talk:fake", said);
            inbound.digest_reaction(&h, BOT).await;
        }
        assert_eq!(hs.requests(), Vec::<String>::new());
        // Not taken either: the same event is still new.
        assert_eq!(inbound.first_time("$r1:fake").await, Some(true));
    }

    #[tokio::test]
    async fn a_confirmation_is_fetched_only_once_its_reaction_is_taken() {
        let (hs, _, inbound) = fake::channel().await;
        let first = member(&inbound, "toolu_c1").await;
        let marked = confirmation_key("$confirm:fake");
        inbound
            .store
            .set_value(&marked, Some(first.id.to_string()))
            .await
            .unwrap();
        hs.event_is(json!({"body": "Allow all 1?", "msgtype": "m.text"}));
        // A reaction seen before: nothing is fetched.
        assert_eq!(inbound.first_time("$seen:fake").await, Some(true));
        let again = reaction("$seen:fake", "$confirm:fake", Said::Allow);
        inbound.digest_reaction(&again, BOT).await;
        assert_eq!(hs.requests(), Vec::<String>::new());
        // 👀 never confirms: nothing fetched, nothing taken.
        let look = reaction("$look:fake", "$confirm:fake", Said::Review);
        inbound.digest_reaction(&look, BOT).await;
        assert_eq!(hs.requests(), Vec::<String>::new());
        assert_eq!(inbound.first_time("$look:fake").await, Some(true));
        // A new one: taken, then the confirmation fetched once.
        let new = reaction("$new:fake", "$confirm:fake", Said::Allow);
        inbound.digest_reaction(&new, BOT).await;
        let fetched: Vec<String> = hs
            .requests()
            .into_iter()
            .filter(|r| r.contains("/event/"))
            .collect();
        assert_eq!(fetched.len(), 1, "{fetched:?}");
        assert_eq!(inbound.first_time("$new:fake").await, Some(false));
    }

    #[tokio::test]
    async fn a_marked_digest_is_found_under_its_members_session_without_a_fetch() {
        let (hs, matrix, inbound) = fake::channel().await;
        let first = member(&inbound, "toolu_d1").await;
        let session = session_key(&first);
        let shown = Shown {
            message_ref: Some("$digest:fake".into()),
            set: "set-1".into(),
            ..Shown::default()
        };
        inbound
            .digests
            .set_shown(ROOM, &session, Some(&shown))
            .await
            .unwrap();
        // A digest edited is marked (one posted before marks were kept, too).
        let sheet = fake::sheet(&session, "set-1", &first.incarnation());
        matrix
            .edit_digest(ROOM, "$digest:fake", &sheet)
            .await
            .unwrap();
        let h = reaction("$r:fake", "$digest:fake", Said::Deny);
        let Some(Found::Digest(on)) = inbound.found(&h).await else {
            panic!("the digest is not found");
        };
        assert_eq!(
            (on.address.as_str(), on.session, on.set.as_str(), on.action),
            (ROOM, session, "set-1", DigestAction::DenyAll)
        );
        // 🔁 means nothing on a digest.
        let similar = reaction("$s:fake", "$digest:fake", Said::Similar);
        assert!(inbound.found(&similar).await.is_none());
        // Only the edit was sent: nothing fetched.
        assert!(
            hs.requests().iter().all(|r| r.starts_with("PUT ")),
            "{:?}",
            hs.requests()
        );
    }
}
