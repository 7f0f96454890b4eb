#!/usr/bin/env bash
# Installs discord.py (pinned below) into a virtualenv under <target dir>/discordpy, for the
# test that validates the fake Discord (tests/it/discord/fake.rs) against a widely used client
# library. A virtualenv whose pin matches is reused, so a second run costs nothing.
#
#   tests/external/discord/install.sh [--target DIR]
#
# DIR defaults to $CARGO_TARGET_DIR or ./target. Exits 0 when `<DIR>/discordpy/venv/bin/python
# -c "import discord"` works afterwards, 1 with the reason on standard error otherwise.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../../target}"
if [ "${1:-}" = "--target" ]; then
  target="$2"
fi
pin="discord.py==2.7.1"
venv="$target/discordpy/venv"
stamp="$venv/.imrelay-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pin" ] && "$venv/bin/python" -c "import discord" 2>/dev/null; then
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 is not installed (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
if ! python3 -m venv "$venv" >"$target/discordpy/venv.log" 2>&1; then
  echo "cannot create a virtualenv (Debian: apt-get install python3-venv); see $target/discordpy/venv.log" >&2
  exit 1
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check "$pin" >"$target/discordpy/pip.log" 2>&1; then
  echo "cannot install $pin from PyPI; see $target/discordpy/pip.log" >&2
  exit 1
fi
if ! "$venv/bin/python" -c "import discord" 2>/dev/null; then
  echo "$pin installed but does not import" >&2
  exit 1
fi
echo "$pin" >"$stamp"
