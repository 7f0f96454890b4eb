//! Which configuration file is read: the one named with `--config` or `IMRELAY_CONFIG`, else
//! the first that exists of `./imrelay.toml`, the user's `imrelay/imrelay.toml` (under
//! `$XDG_CONFIG_HOME`, or `~/.config`) and `/etc/imrelay/imrelay.toml`. What was read, or
//! that nothing was and how to pass a file, is said at start-up and by `check-config`: a
//! file that is silently not read is a setup that silently does nothing.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The file name looked for in each conventional place.
pub const FILE_NAME: &str = "imrelay.toml";

/// The system-wide configuration file.
pub const SYSTEM_FILE: &str = "/etc/imrelay/imrelay.toml";

/// How the configuration file was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigFile {
    /// Named on the command line (`--config`).
    Flag(PathBuf),
    /// Named by the `IMRELAY_CONFIG` environment variable.
    Variable(PathBuf),
    /// Found in a conventional place (`place` says which: "the working directory").
    Found {
        /// The file.
        path: PathBuf,
        /// The place, in words.
        place: &'static str,
    },
    /// None named and none found in the places listed.
    None {
        /// The places looked in, in order.
        looked: Vec<PathBuf>,
    },
}

impl ConfigFile {
    /// The file to read, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Flag(p) | Self::Variable(p) | Self::Found { path: p, .. } => Some(p),
            Self::None { .. } => None,
        }
    }
}

impl fmt::Display for ConfigFile {
    /// One line for the start-up log and `check-config`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag(p) => write!(f, "configuration read from {} (--config)", p.display()),
            Self::Variable(p) => write!(
                f,
                "configuration read from {} (IMRELAY_CONFIG)",
                p.display()
            ),
            Self::Found { path, place } => write!(
                f,
                "configuration read from {} (found in {place}; --config FILE or \
                 IMRELAY_CONFIG=FILE names another)",
                path.display()
            ),
            Self::None { looked } => {
                let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "no configuration file: none was named and none exists at {}; running on \
                     the built-in defaults and IMRELAY__ variables. Pass one with --config FILE \
                     or IMRELAY_CONFIG=FILE, or put it at one of those places",
                    looked.join(", ")
                )
            }
        }
    }
}

/// The conventional places, in the order they are tried, with their names in words. `env`
/// gives `XDG_CONFIG_HOME` and `HOME`; the first place is relative to the working directory.
fn places(env: &HashMap<String, String>) -> Vec<(PathBuf, &'static str)> {
    let mut out = vec![(PathBuf::from(FILE_NAME), "the working directory")];
    let nonempty = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let user = nonempty("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| nonempty("HOME").map(|h| h.join(".config")));
    if let Some(dir) = user {
        out.push((
            dir.join("imrelay").join(FILE_NAME),
            "the user's configuration directory",
        ));
    }
    out.push((
        PathBuf::from(SYSTEM_FILE),
        "the system's configuration directory",
    ));
    out
}

/// Chooses the configuration file: `flag` (from `--config`, or `IMRELAY_CONFIG` when it is
/// that variable's value), else the first conventional place where a file exists.
pub fn locate(flag: Option<&Path>, env: &HashMap<String, String>) -> ConfigFile {
    if let Some(path) = flag {
        let from_variable = env
            .get("IMRELAY_CONFIG")
            .is_some_and(|v| Path::new(v) == path);
        return if from_variable {
            ConfigFile::Variable(path.to_path_buf())
        } else {
            ConfigFile::Flag(path.to_path_buf())
        };
    }
    let places = places(env);
    for (path, place) in &places {
        if path.is_file() {
            return ConfigFile::Found {
                path: path.clone(),
                place,
            };
        }
    }
    ConfigFile::None {
        looked: places.into_iter().map(|(p, _)| p).collect(),
    }
}

/// [`locate`] with the process environment.
pub fn locate_here(flag: Option<&Path>) -> ConfigFile {
    let env: HashMap<String, String> = ["IMRELAY_CONFIG", "XDG_CONFIG_HOME", "HOME"]
        .into_iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    locate(flag, &env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_directory_follows_xdg_then_home() {
        let env = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let user = |e| places(&e).get(1).map(|(p, _)| p.clone());
        assert_eq!(
            user(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/imrelay/imrelay.toml"))
        );
        assert_eq!(
            user(env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/imrelay/imrelay.toml"))
        );
        // Neither: only the working directory and the system's.
        assert_eq!(places(&env(&[])).len(), 2);
    }
}
