//! WeCom (企业微信): the intelligent bot's long connection and the classic callback
//! encryption a WeCom channel is built from, tested against a fake on loopback. Not yet
//! installed by [`crate::channels::install`]: the channel (template cards, the delivery
//! skeleton, the answer pipeline) plugs them in.
//!
//! - [`bot`] — the long connection: `aibot_subscribe`, `ping`, callbacks, replies and card
//!   updates answered by WeCom, redeliveries handled once.
//! - [`crypto`] — the callback URL's signature and AES-CBC message encryption.

pub mod bot;
pub mod crypto;

/// The channel's name.
pub const CHANNEL: &str = "wecom";
