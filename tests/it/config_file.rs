//! Which configuration file the real binary reads: the one named, else `./imrelay.toml`,
//! else the user's configuration directory; and that it says which (or that none was, and
//! how to pass one) at start-up and in `check-config`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

/// `imrelay args` in `dir`, with only `env` in its environment; (status, stdout, stderr).
fn imrelay(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("imrelay runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_reads_imrelay_toml_in_the_working_directory_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("imrelay.toml"),
        "[server]\nlisten = \"127.0.0.1:8799\"\n",
    )
    .unwrap();
    let (code, out, err) = imrelay(dir.path(), &["check-config"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("listen = \"127.0.0.1:8799\""), "{out}");
    assert!(
        err.contains("configuration read from imrelay.toml (found in the working directory"),
        "{err}"
    );
}

#[test]
fn the_users_configuration_directory_is_read_next() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let xdg = home.path().join("xdg");
    std::fs::create_dir_all(xdg.join("imrelay")).unwrap();
    std::fs::write(
        xdg.join("imrelay/imrelay.toml"),
        "[server]\nlisten = \"127.0.0.1:8798\"\n",
    )
    .unwrap();
    let (code, out, err) = imrelay(
        dir.path(),
        &["check-config"],
        &[("XDG_CONFIG_HOME", xdg.to_str().unwrap())],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("listen = \"127.0.0.1:8798\""), "{out}");
    assert!(err.contains("the user's configuration directory"), "{err}");
    // Without XDG_CONFIG_HOME: ~/.config.
    std::fs::create_dir_all(home.path().join(".config")).unwrap();
    std::fs::rename(xdg.join("imrelay"), home.path().join(".config/imrelay")).unwrap();
    let (code, out, _) = imrelay(
        dir.path(),
        &["check-config"],
        &[("HOME", home.path().to_str().unwrap())],
    );
    assert_eq!(code, Some(0));
    assert!(out.contains("listen = \"127.0.0.1:8798\""), "{out}");
    // The working directory's file wins over the user's.
    std::fs::write(
        dir.path().join("imrelay.toml"),
        "[server]\nlisten = \"127.0.0.1:8797\"\n",
    )
    .unwrap();
    let (_, out, _) = imrelay(
        dir.path(),
        &["check-config"],
        &[("HOME", home.path().to_str().unwrap())],
    );
    assert!(out.contains("listen = \"127.0.0.1:8797\""), "{out}");
    // A file named wins over both, and is said to be named.
    std::fs::write(dir.path().join("other.toml"), "").unwrap();
    let (_, out, err) = imrelay(
        dir.path(),
        &["--config", "other.toml", "check-config"],
        &[("HOME", home.path().to_str().unwrap())],
    );
    assert!(out.contains("listen = \"127.0.0.1:8787\""), "{out}");
    assert!(
        err.contains("configuration read from other.toml (--config)"),
        "{err}"
    );
    let (_, _, err) = imrelay(
        dir.path(),
        &["check-config"],
        &[("IMRELAY_CONFIG", "other.toml")],
    );
    assert!(
        err.contains("configuration read from other.toml (IMRELAY_CONFIG)"),
        "{err}"
    );
}

#[test]
fn no_file_is_said_with_how_to_pass_one() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = imrelay(dir.path(), &["check-config"], &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("no configuration file: none was named and none exists at imrelay.toml"),
        "{err}"
    );
    assert!(
        err.contains("--config FILE or IMRELAY_CONFIG=FILE"),
        "{err}"
    );
}

/// `imrelay serve` logs which file it read before it is ready.
#[test]
fn serve_logs_the_file_it_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("imrelay.toml"),
        "[server]\nlisten = \"127.0.0.1:0\"\n[store]\nbackend = \"memory\"\n[log]\nformat = \"json\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_imrelay"))
        .current_dir(dir.path())
        .env_clear()
        .env("RUST_LOG", "info")
        .arg("serve")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("imrelay starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut said = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line.contains("configuration read from") {
            said = Some(line.clone());
        }
        if line.contains("imrelay is ready") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let said = said.expect("the file is named before the server is ready");
    assert!(
        said.contains("imrelay.toml (found in the working directory"),
        "{said}"
    );
}
