//! Records the git commit the binary is built from, for `imrelay --version`.

use std::process::Command;

fn main() {
    let commit = std::env::var("IMRELAY_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            let out = Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=IMRELAY_GIT_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=IMRELAY_GIT_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
}
