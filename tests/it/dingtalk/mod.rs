//! DingTalk against a fake gateway, WebSocket and OpenAPI on loopback: Stream mode (the
//! connection request, ping and disconnect frames, card-click callbacks and their
//! acknowledgements, redeliveries, refused credentials) and the channel end to end (cards
//! created and updated, every click through the answer pipeline, restarts).

pub(crate) mod channel;
pub(crate) mod fake;
mod passkey;
mod quiet;
mod steer;
mod stream;
