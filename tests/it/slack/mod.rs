//! Slack's transports against a fake Slack on loopback: the Web API client (shapes, tokens,
//! errors and their classification, `Retry-After`) and Socket Mode (acknowledgements,
//! copies, `disconnect`, drops, several connections, shutdown).

pub mod fake;
mod socket;
mod web_api;
