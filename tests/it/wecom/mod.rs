//! WeCom's intelligent-bot long connection against a fake on loopback: the subscription and
//! its refusal, heartbeats, callbacks handled once, a card click answered with a card update
//! on its own `req_id` (and refused after WeCom's window), unprompted sends, and the
//! connection taken over by another client.

mod bot;
pub(crate) mod channel;
pub(crate) mod fake;
mod passkey;
