//! The digest buttons' values, once for every chat channel whose buttons carry a text value
//! of 100 characters or more (Slack's `value`, Discord's `custom_id`), and a click on one
//! answered through the kit ([`crate::channels::digest_flow`]).
//!
//! A value is `<action> <place> <session> <set> <tag>`: the tag (16 bytes of the channel's
//! button secret's MAC, base64url) binds the action, the place the digest was posted to, the
//! session key and the fingerprint of the listed interactions, under a domain of the
//! channel's own, so a value is good on one channel only. At most 86 characters (a place of
//! 21: a Discord `@<user id>`).

use super::digest::{DigestAction, Digests, Sheet, Tapper};
use super::digest_flow::{Press, Tapped};
use super::digest_texts::Texts;
use super::pipeline::{Feedback, Pipeline};
use super::plan::ChatJob;
use super::token::Signer;

const TAG_BYTES: usize = 16;

/// Signs and reads digest button values.
#[derive(Clone, Debug)]
pub(crate) struct DigestButtons {
    signer: Signer,
    domain: &'static [u8],
}

impl DigestButtons {
    /// Values signed with `key` (the channel's button secret) under `domain`
    /// (`imrelay/<channel>/digest/v1`).
    pub(crate) fn new(key: Vec<u8>, domain: &'static [u8]) -> Self {
        Self {
            signer: Signer::new(key),
            domain,
        }
    }

    fn parts<'a>(code: &'a str, place: &'a str, session: &'a str, set: &'a str) -> [&'a [u8]; 4] {
        [
            code.as_bytes(),
            place.as_bytes(),
            session.as_bytes(),
            set.as_bytes(),
        ]
    }

    /// The value of digest button `action` on `sheet`.
    pub(crate) fn value(&self, sheet: &Sheet, action: DigestAction) -> String {
        let code = action.code().to_string();
        let parts = Self::parts(&code, &sheet.address, &sheet.session, &sheet.set);
        let tag = self.signer.tag(self.domain, &parts, TAG_BYTES);
        format!(
            "{code} {} {} {} {tag}",
            sheet.address, sheet.session, sheet.set
        )
    }

    /// The action, place, session and set a value carries, if its tag checks out.
    pub(crate) fn read(&self, value: &str) -> Option<(DigestAction, String, String, String)> {
        let mut it = value.split(' ');
        let (code, place, session, set, tag) =
            (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
        if it.next().is_some() {
            return None;
        }
        let parts = Self::parts(code, place, session, set);
        if !self.signer.verify(self.domain, &parts, TAG_BYTES, tag) {
            return None;
        }
        let action = DigestAction::from_code(code.chars().next()?)?;
        Some((action, place.into(), session.into(), set.into()))
    }
}

/// A click on a digest button `value` on digest message `message` by `who`: what it did
/// (the caller shows the redraw), or what to tell them. A value whose tag does not check out
/// is refused and recorded.
pub(crate) async fn click<J: ChatJob>(
    digests: &Digests,
    pipeline: &Pipeline,
    buttons: &DigestButtons,
    texts: Texts,
    value: &str,
    message: &str,
    who: &Tapper<'_>,
) -> Result<Tapped, Feedback> {
    let Some((action, place, session, set)) = buttons.read(value) else {
        let recorded = pipeline
            .registry()
            .refused(
                None,
                who.actor,
                pipeline.via(),
                "digest button data failed its integrity check",
            )
            .await;
        return Err(match recorded {
            Ok(()) => Feedback::BadButton,
            Err(_) => Feedback::StoreDown,
        });
    };
    let press = Press {
        address: &place,
        session: &session,
        action,
        set: &set,
        message,
    };
    digests.tap::<J>(pipeline, texts, &press, who).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_bound_to_their_place_session_action_set_and_channel() {
        let b = DigestButtons::new(vec![7; 32], b"imrelay/slack/digest/v1");
        let sheet = Sheet::closed(
            Texts(crate::present::render::Locale::EnUs),
            "C1",
            "LMbAeCb6pWs",
            "x",
        );
        let v = b.value(&sheet, DigestAction::ConfirmAllow);
        let (a, place, session, _) = b.read(&v).unwrap();
        assert_eq!(
            (a, place.as_str(), session.as_str()),
            (DigestAction::ConfirmAllow, "C1", "LMbAeCb6pWs")
        );
        assert!(b.read(&v.replacen("C1", "C2", 1)).is_none());
        assert!(b.read(&v.replacen('A', "D", 1)).is_none());
        assert!(
            DigestButtons::new(vec![8; 32], b"imrelay/slack/digest/v1")
                .read(&v)
                .is_none()
        );
        assert!(
            DigestButtons::new(vec![7; 32], b"imrelay/discord/digest/v1")
                .read(&v)
                .is_none(),
            "good on its own channel only"
        );
        assert!(b.read("").is_none());
    }
}
