//! DingTalk's Stream mode against a fake gateway and WebSocket on loopback: the connection
//! request, ping and disconnect frames, card-click callbacks and their acknowledgements,
//! redeliveries, and refused credentials.

pub mod fake;
mod stream;
