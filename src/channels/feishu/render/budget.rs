//! How big a card may be: the platform's limit on a request body, the card's size measured
//! as it travels, and the budget of untrusted text a card shows, which shrinks step by step
//! until the card fits.

use serde_json::Value;

use crate::interaction::Kind;

/// The platform refuses a card message whose request body exceeds 30 KB. The card travels as a
/// JSON string inside that body (escaped a second time), so this is what is measured; read
/// as 30,000 bytes so either meaning of "KB" is respected.
pub(crate) const MAX_REQUEST_BYTES: usize = 30_000;
/// Room kept in the request body for everything but the card: `receive_id` (an email can be
/// long), `msg_type`, `uuid` and the JSON around them.
pub(crate) const ENVELOPE_BYTES: usize = 1024;
/// Characters of tool input shown before cutting (reduced further if the card is too big).
pub(crate) const INPUT_CHARS: usize = 6000;

/// The length of `s` written as a JSON string literal, as serde_json writes it (quotes,
/// `\"`, `\\`, short escapes for common control characters, `\u00XX` for the others).
pub(super) fn json_string_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The bytes `card` takes in a send or update request body: the card's JSON, escaped again as
/// the `content` string, plus [`ENVELOPE_BYTES`].
pub(crate) fn request_bytes(card: &Value) -> usize {
    json_string_len(&card.to_string()) + ENVELOPE_BYTES
}

/// How many characters of each kind of untrusted text a card shows. A card that does not fit
/// the request limit is rebuilt with a smaller budget, step by step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Budget {
    /// Tool input (approvals).
    pub(super) input: usize,
    /// Each option's description (questions); 0 leaves descriptions out.
    pub(super) option: usize,
    /// Each question's text, and each answer on a resolved question card.
    pub(super) question: usize,
    /// The interaction's title, description and deny reason (the context line gets less).
    pub(super) text: usize,
}

impl Budget {
    /// Everything at its most.
    pub(super) const FULL: Budget = Budget {
        input: INPUT_CHARS,
        option: 300,
        question: 500,
        text: 1000,
    };

    /// The next smaller budget for a card of `kind`, or `None` at the floor. Tool input goes
    /// first, then option descriptions (down to none), then question texts, then the rest.
    pub(super) fn shrink(self, kind: Kind) -> Option<Budget> {
        let mut b = self;
        // Every kind is named, so a new one must choose what it gives up first.
        match kind {
            Kind::Approval if b.input > 200 => b.input /= 2,
            Kind::Question if b.option > 0 => {
                b.option = if b.option > 40 { b.option / 2 } else { 0 };
            }
            Kind::Question if b.question > 60 => b.question = (b.question / 2).max(60),
            Kind::Form if b.question > 60 => b.question = (b.question / 2).max(60),
            Kind::Approval | Kind::Question | Kind::Form if b.text > 100 => {
                b.text = (b.text / 2).max(100)
            }
            Kind::Approval | Kind::Question | Kind::Form => return None,
        }
        Some(b)
    }
}
