//! Discord against a fake Discord on loopback (REST and a Gateway WebSocket, validated with
//! discord.py in `tests/external/discord.rs`): the channel end to end (`channel`).

pub(crate) mod channel;
mod commands;
pub(crate) mod fake;
mod passkey;
mod steer;
mod threads;
