//! Slack: the transports and the Web API client a Slack channel is built from, each tested
//! against a fake Slack on loopback. Not yet installed by [`crate::channels::install`]: the
//! channel (rendering, the delivery skeleton, the answer pipeline) plugs these in.
//!
//! - [`settings`] — `[slack]`: tokens, signing secret, mode, connections, channels, approvers.
//! - [`api`] — the Web API subset (`auth.test`, `chat.postMessage`, `chat.update`,
//!   `chat.postEphemeral`, `views.open`, `apps.connections.open`) with every failure
//!   classified as retry-after-N, transient or permanent.
//! - [`socket`] — Socket Mode: several WebSocket connections, every envelope acknowledged
//!   within Slack's 3 s, copies recognised, `disconnect` answered by a replacement first.
//! - [`verify`] — the HTTP endpoint's request signatures (v0, five minutes, no replays).

pub mod api;
pub mod settings;
pub mod socket;
pub mod verify;

pub use settings::{Mode, SlackSettings};

/// The channel's name (its `Via`, its outbox channel, its health component).
pub const CHANNEL: &str = "slack";
