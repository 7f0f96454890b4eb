#!/usr/bin/env bash
# Installs the real agent programs that the end-to-end agent tests drive (tests/external/agents)
# from npm, at the versions pinned in npm/<name>/package-lock.json, into
# <target dir>/agents/<name>/node_modules. An installation whose lock file matches is reused,
# so a second run costs nothing.
#
#   tests/external/agents/install.sh [--target DIR] [NAME...]
#
# NAME is a directory under npm/ (claude-code, codex, gemini-cli, opencode); none means all.
# DIR defaults to $CARGO_TARGET_DIR or ./target. Exits 0 when every program installed and runs,
# and otherwise 1, with one line per failure on standard error saying why (npm missing, the
# registry unreachable, a binary that does not start). The tests call this script themselves;
# .ci/run calls it first so that an unreachable registry fails CI loudly.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../../target}"
if [ "${1:-}" = "--target" ]; then
  target="$2"
  shift 2
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=()
  for d in "$here"/npm/*/; do names+=("$(basename "$d")"); done
fi

# The command each installed program is checked with: it must print its version.
binary_of() {
  case "$1" in
    claude-code) echo claude ;;
    codex) echo codex ;;
    gemini-cli) echo gemini ;;
    opencode) echo opencode ;;
    *) return 1 ;;
  esac
}

if ! command -v npm >/dev/null 2>&1; then
  echo "npm is not installed (install Node.js 20 or later with npm)" >&2
  exit 1
fi

failed=0
for name in "${names[@]}"; do
  src="$here/npm/$name"
  if [ ! -f "$src/package-lock.json" ] || ! bin="$(binary_of "$name")"; then
    echo "$name: no such agent under $here/npm" >&2
    failed=1
    continue
  fi
  dest="$target/agents/$name"
  stamp="$dest/node_modules/.imrelay-installed"
  want="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$dest/node_modules/.bin/$bin" ]; then
    continue
  fi
  mkdir -p "$dest"
  cp "$src/package.json" "$src/package-lock.json" "$dest/"
  log="$dest/npm-install.log"
  echo "installing $name from npm into $dest" >&2
  # The versions are exact in package.json and the lock file pins the rest (`npm ci` is not
  # used: it refuses a lock file that lists only this platform's optional binaries, as npm
  # writes it for opencode-ai). A registry that cannot be reached fails after npm's own
  # retries, which a short fetch timeout keeps to about a minute.
  if ! (cd "$dest" && npm install --no-audit --no-fund --loglevel=error \
          --fetch-retries=1 --fetch-timeout=30000 >"$log" 2>&1); then
    reason="$(grep -v -e 'complete log of this run' -e '^npm error *$' "$log" | grep -m2 -E 'npm error|ERR' | tr '\n' ' ')"
    echo "$name: npm install failed (${reason:-see $log}); full log: $log" >&2
    failed=1
    continue
  fi
  # Checked with a home of its own, so that nothing is written to the user's.
  home="$dest/version-check-home"
  mkdir -p "$home"
  if ! version="$(HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" \
        XDG_CACHE_HOME="$home/.cache" XDG_STATE_HOME="$home/.local/state" CODEX_HOME="$home/.codex" \
        timeout 60 "$dest/node_modules/.bin/$bin" --version 2>&1)"; then
    echo "$name: installed, but \`$bin --version\` failed: $(echo "$version" | tail -n1)" >&2
    failed=1
    continue
  fi
  echo "$want" >"$stamp"
  echo "installed $name: $(echo "$version" | tail -n1)" >&2
done
exit $failed
