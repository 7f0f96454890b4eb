#!/usr/bin/env bash
# Installs the Matrix homeserver that the Matrix channel's tests run against (Synapse, from
# PyPI, at the version pinned below) into <target dir>/synapse-venv. An installation of the
# same version is reused, so a second run costs nothing.
#
#   tests/external/synapse/install.sh [--target DIR]
#
# DIR defaults to $CARGO_TARGET_DIR or ./target. Exits 0 when Synapse is installed and its
# `synapse_homeserver` and `register_new_matrix_user` programs run, and otherwise 1 with a line
# on standard error saying why (no python3 with venv, PyPI unreachable). The tests call this
# script themselves; .ci/run calls it first so that an unreachable registry fails CI loudly.
set -uo pipefail

version="1.163.2"
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../../target}"
if [ "${1:-}" = "--target" ]; then
  target="$2"
  shift 2
fi
venv="$target/synapse-venv"
stamp="$venv/.imrelay-installed"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ] && [ -x "$venv/bin/register_new_matrix_user" ]; then
  exit 0
fi
python="$(command -v python3 || true)"
if [ -z "$python" ]; then
  echo "python3 is not installed (install Python 3.10 or later with venv)" >&2
  exit 1
fi
mkdir -p "$target"
log="$target/synapse-install.log"
if ! "$python" -m venv "$venv" >"$log" 2>&1; then
  echo "could not create a virtualenv at $venv (see $log)" >&2
  exit 1
fi
if ! "$venv/bin/pip" install --quiet "matrix-synapse==$version" >>"$log" 2>&1; then
  echo "could not install matrix-synapse $version from PyPI (see $log)" >&2
  exit 1
fi
if ! "$venv/bin/python" -c 'import synapse.app.homeserver' >>"$log" 2>&1; then
  echo "matrix-synapse $version installed but does not import (see $log)" >&2
  exit 1
fi
echo "$version" >"$stamp"
