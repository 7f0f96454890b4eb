//! Tests that need something beside the Rust toolchain: a PostgreSQL server, Chromium,
//! a Matrix homeserver (Synapse), `systemd-analyze`, files that even root cannot write (`chattr +i`). Whether each is here is known only when the tests run, and the
//! standard test harness can mark a test ignored only when it is compiled; so this binary has
//! its own harness (libtest-mimic, `harness = false`), which reports a test whose need is
//! missing as `ignored (reason)` in cargo test's own output, and counts it among the ignored.
//!
//! `IMRELAY_TEST_POSTGRES=require` turns a missing PostgreSQL server into a failure (CI sets
//! it); `IMRELAY_TEST_POSTGRES_URL` names the server (default
//! `postgres://postgres@127.0.0.1:5432/test`).

use std::future::Future;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

// The helpers of the `it` tests, shared by path (this binary uses only some of them).
#[allow(dead_code)]
#[path = "../it/contract.rs"]
mod contract;
#[allow(dead_code)]
mod feishu;
mod grants;
#[allow(dead_code)]
#[path = "../it/ntfy_fake.rs"]
mod ntfy_fake;
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;
#[allow(dead_code)]
#[path = "../it/telegram/fake.rs"]
mod telegram_fake;

mod agents;
mod discord;
mod escalation;
mod inbox;
mod matrix;
mod parity;
mod postgres;
mod proxy;
mod quorum;
mod read_only_disk;
mod replicas;
mod stalls;
mod systemd;

/// Whether what a test needs is here.
pub enum Need {
    /// It is: run the test.
    Here,
    /// It is not: report the test as ignored, for this reason.
    Missing(String),
    /// It is not, and must be: fail the test with this message.
    Required(String),
}

/// A test that runs on its own single-threaded tokio runtime (as `#[tokio::test]` does)
/// when `need` says it can.
pub fn trial<F, Fut>(name: &str, need: fn() -> Need, test: F) -> Trial
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    Trial::ignorable_test(name, move || {
        match need() {
            Need::Here => {}
            Need::Missing(reason) => return Ok(Completion::ignored_with(reason)),
            Need::Required(message) => return Err(Failed::from(message)),
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failed::from(format!("cannot start a runtime: {e}")))?;
        rt.block_on(test());
        Ok(Completion::Completed)
    })
}

fn main() {
    if agents::fake_model::serve_from_env() {
        return;
    }
    let args = Arguments::from_args();
    let trials = [
        postgres::trials(),
        replicas::trials(),
        escalation::trials(),
        quorum::trials(),
        grants::trials(),
        stalls::trials(),
        inbox::trials(),
        read_only_disk::trials(),
        systemd::trials(),
        agents::trials(),
        discord::trials(),
        matrix::trials(),
        parity::trials(),
    ]
    .into_iter()
    .flatten()
    .collect();
    libtest_mimic::run(&args, trials).exit();
}
