//! Records the git commit the binary is built from, for `imrelay --version`.
//!
//! The script asks cargo to run it again only when the commit can have changed: when `HEAD`
//! or the branch it points to moves. Those files are found through git itself, because in a
//! linked worktree `.git` is a file and the refs live in the main repository; a watched path
//! that does not exist would make cargo rebuild imrelay on every build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `git args...` prints, trimmed, when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Asks cargo to rerun this script when `path` changes, if it exists.
fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=IMRELAY_GIT_COMMIT");
    let pinned = std::env::var("IMRELAY_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty());
    let commit = pinned
        .clone()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=IMRELAY_GIT_COMMIT={commit}");
    if pinned.is_some() {
        return;
    }
    // `HEAD` is per worktree; branches and packed refs are shared by all of them.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]).map(PathBuf::from) {
        watch(&dir.join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        let common = PathBuf::from(common);
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(&common.join(branch));
        }
        watch(&common.join("packed-refs"));
    }
}
