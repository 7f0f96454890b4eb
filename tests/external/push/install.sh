#!/usr/bin/env bash
# Installs what the Web Push tests (tests/external/push.rs) check imrelay against: Python's
# `http-ece` (RFC 8188/8291 decryption, written by others) and `cryptography` (ES256 signature
# checks of the VAPID JWT), at the versions pinned in requirements.txt, into a virtual
# environment at <target dir>/pyenv. An environment whose requirements match is reused, so a
# second run costs nothing.
#
#   tests/external/push/install.sh [--target DIR]
#
# DIR defaults to $CARGO_TARGET_DIR or ./target. Exits 0 when the environment is ready, and
# otherwise 1 with a line on standard error saying why (no python3 or venv, PyPI unreachable).
# The tests call this script themselves; .ci/run calls it first so that a failure shows loudly.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../../target}"
if [ "${1:-}" = "--target" ]; then
  target="$2"
fi
env="$target/pyenv"
stamp="$env/.imrelay-installed"
want="$(sha256sum < "$here/requirements.txt" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$env/bin/python" ]; then
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 is not installed (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi
mkdir -p "$target"
if ! python3 -m venv "$env" >"$target/pyenv-install.log" 2>&1; then
  echo "python3 cannot make a virtual environment (Debian: apt-get install python3-venv); see $target/pyenv-install.log" >&2
  exit 1
fi
if ! "$env/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements.txt" >>"$target/pyenv-install.log" 2>&1; then
  echo "pip could not install $here/requirements.txt (is PyPI reachable?); see $target/pyenv-install.log" >&2
  exit 1
fi
if ! "$env/bin/python" -c "import http_ece, cryptography" >>"$target/pyenv-install.log" 2>&1; then
  echo "http_ece does not import after installing; see $target/pyenv-install.log" >&2
  exit 1
fi
echo "$want" >"$stamp"
