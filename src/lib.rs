//! imrelay: a human-in-the-loop relay for AI agents.
//!
//! An agent hands imrelay a tool approval or a question and waits; imrelay shows it on every
//! configured channel at once, and the first valid answer from any of them resolves it.

pub mod interaction;
pub mod store;
