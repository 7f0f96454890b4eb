//! Integration tests: the real server on 127.0.0.1:0, real HTTP, fake external services on
//! loopback. One test binary with a module per feature links once.

mod api;
mod audit;
mod auth;
mod bad_input;
mod cli;
mod connections;
mod deploy;
mod feishu;
mod hooks;
mod inbox;
mod numbers;
mod outbox;
mod questions;
mod restart;
mod sse;
mod store;
mod support;
mod telegram;
mod terminal;
mod webhooks;
