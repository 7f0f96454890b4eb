//! The Feishu/Lark channel against a fake OpenAPI server on loopback: cards, the callback
//! endpoint and its cryptography, answers, updates, retries and restarts.

mod cards;
mod delivery;
mod digest;
mod escalation;
pub(crate) mod fake;
pub(crate) mod fake_ws;
pub(crate) mod gate;
mod grants;
mod helpers;
mod routes;
mod steer;
mod threads;
mod webhook;
mod ws;

pub(crate) use helpers::*;
