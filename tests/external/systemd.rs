//! The systemd unit as systemd itself reads it: `systemd-analyze verify`, and its exposure
//! score under `systemd-analyze security` (ignored, with the reason, where `systemd-analyze`
//! is not installed). Its text is checked in the `it` tests (`deploy::systemd_unit`).

use std::path::PathBuf;
use std::process::Command;

use libtest_mimic::Trial;

use crate::{Need, trial};

pub(crate) fn trials() -> Vec<Trial> {
    vec![trial(
        "systemd::the_unit_verifies_and_stays_hardened",
        systemd_analyze,
        the_unit_verifies_and_stays_hardened,
    )]
}

fn systemd_analyze() -> Need {
    match Command::new("systemd-analyze").arg("--version").output() {
        Ok(out) if out.status.success() => Need::Here,
        _ => Need::Missing("systemd-analyze is not installed".into()),
    }
}

async fn the_unit_verifies_and_stays_hardened() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let unit = std::fs::read_to_string(root.join("deploy/systemd/imrelay.service")).unwrap();
    // Verify a copy whose ExecStart points at the binary just built.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("imrelay.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/imrelay", env!("CARGO_BIN_EXE_imrelay")),
    )
    .unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "systemd-analyze verify: {stderr}");
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(&copy)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&security.stdout);
    let score: f64 = out
        .lines()
        .find_map(|l| l.split("exposure level for imrelay.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure score in: {out}"));
    assert!(score <= 1.5, "the unit's exposure rose to {score}");
}
