//! A reaction on a Matrix digest: ✅ Approve all and ❌ Deny all (each asks to confirm, in a
//! message of its own under the digest), 👀 Review (the next member posted on its own); and
//! ✅ (yes) or ❌ (cancel) on that confirmation. The kit's digest flow
//! (`channels::digest_flow`) does the rest, as for every channel: the approver checks, a
//! confirmation bound to the set it listed (a set changed since is refused as stale and the
//! list shown as it now is), each member answered on its own.
//!
//! A reaction carries nothing but the event it is on: a digest is found by its message
//! (`Digests::by_message`), and a confirmation carries what it confirms in its own content
//! (`org.imrelay.digest`), read back from the homeserver and taken only from the bot's own
//! event (the homeserver names the sender; nobody else can post as the bot).

use serde_json::{Value, json};

use super::Job;
use super::deliver::{formatted, txn};
use super::inbound::{Heard, Inbound, Said};
use crate::channels::digest::{DigestAction, Sheet, Tapper};
use crate::channels::digest_flow::{Press, Tapped};
use crate::channels::digest_texts::Texts;
use crate::channels::messages::Platform;
use crate::channels::pipeline::Feedback;

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

impl Inbound {
    /// Takes reaction `h` through the kit's digest flow when it is on a digest or a digest's
    /// confirmation (`me`: the bot); anything else is left alone.
    pub(super) async fn digest_reaction(&self, h: &Heard, me: &str) {
        let Some(on) = self.digest_on(h, me).await else {
            return;
        };
        if !self.taken_once(h).await {
            return;
        }
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

    /// What reaction `h` is on, when it is a digest or a confirmation the bot (`me`) posted.
    async fn digest_on(&self, h: &Heard, me: &str) -> Option<On> {
        // A digest in the room, or in the direct room with the person reacting.
        for address in [h.room.as_str(), h.sender.as_str()] {
            let found = self.digests.by_message(address, &h.prompt).await;
            if let Ok(Some((session, shown))) = found {
                let action = match h.said {
                    Said::Allow => DigestAction::AllowAll,
                    Said::Deny => DigestAction::DenyAll,
                    Said::Review => DigestAction::Review,
                    Said::Similar | Said::Reply(_) => return None,
                };
                return Some(On {
                    address: address.to_string(),
                    session,
                    set: shown.set,
                    digest: h.prompt.clone(),
                    confirmation: None,
                    action,
                });
            }
        }
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
        self.matrix.post_content(&on.address, content, &parts).await
    }
}
