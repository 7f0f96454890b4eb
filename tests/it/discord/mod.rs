//! Discord against a fake Discord on loopback (REST and a Gateway WebSocket, validated with
//! discord.py in `tests/external/discord.rs`): the channel end to end (`channel`).

pub mod channel;
pub mod fake;
