//! Slack against a fake Slack on loopback: the channel end to end (`channel`), and the Web API client (shapes, tokens,
//! errors and their classification, `Retry-After`) and Socket Mode (acknowledgements,
//! copies, `disconnect`, drops, several connections, shutdown).

pub(crate) mod channel;
pub(crate) mod fake;
mod passkey;
mod socket;
mod steer;
mod threads;
mod web_api;
