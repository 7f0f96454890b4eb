//! DingTalk (钉钉): the Stream mode transport a DingTalk channel is built from, tested
//! against a fake gateway and WebSocket on loopback. Not yet installed by
//! [`crate::channels::install`]: the channel (cards, the delivery skeleton, the answer
//! pipeline) plugs it in.
//!
//! - [`stream`] — the gateway request, the WebSocket, `SYSTEM` ping/disconnect, `CALLBACK`
//!   acknowledgements carrying the handler's response, redeliveries answered once.

pub mod stream;

/// The channel's name.
pub const CHANNEL: &str = "dingtalk";
