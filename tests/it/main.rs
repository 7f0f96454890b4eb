//! Integration tests: the real server on 127.0.0.1:0, real HTTP, fake external services on
//! loopback. One test binary with a module per feature links once. (Tests that need a
//! PostgreSQL server, Chromium, systemd-analyze or `chattr +i` are in `tests/external`, whose harness
//! reports the ones it cannot run as ignored, with the reason.)

mod acp;
mod api;
mod audit;
mod auth;
mod bad_input;
mod bodies;
mod budget;
mod bulk;
mod cli;
mod codex;
mod config_checks;
mod config_file;
mod connections;
mod contract;
mod deploy;
pub(crate) mod dingtalk;
pub(crate) mod discord;
mod doc_blocks;
pub(crate) mod doctor;
mod escalation;
pub(crate) mod feishu;
mod forms;
mod grants;
mod hooks;
mod mcp;
mod mcp_sessions;
mod mcp_wire;
mod mixed_writes;
pub(crate) mod ntfy;
mod numbers;
mod opencode;
mod operators;
mod outbox;
mod parity;
mod pipes;
mod policy;
mod policy_starter;
mod presentation;
pub(crate) mod push;
mod questions;
mod restart;
mod sessions;
mod shell_oracle;
pub(crate) mod slack;
mod sse;
mod store;
mod support;
pub(crate) mod telegram;
mod terminal;
mod token_names;
mod vote_credentials;
pub(crate) mod webhooks;
pub(crate) mod wecom;
