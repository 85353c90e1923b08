#!/usr/bin/env bash
# IBM's `ibmcloudant` Python SDK, as shipped (gzip on), against a real settee process.
# Installs the pinned SDK into .venv idempotently (a second run installs nothing; with
# SKIP_INSTALL=1 an existing .venv is used as it is), then runs the pytest suite, which starts
# its own settee ($SETTEE_BIN). Exits non-zero if a test fails or none ran.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export SETTEE_BIN="${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}"
cd "$HERE"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install() {
  local python=python3
  if ! command -v "$python" >/dev/null 2>&1 || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "installing Debian packages: python3 python3-venv"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  local stamp=.venv/.requirements.sha256 wanted
  wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
    echo "$wanted" > "$stamp"
  fi
}

if [ "${SKIP_INSTALL:-}" != 1 ] || [ ! -x .venv/bin/python ]; then
  install
fi
.venv/bin/python -c 'import ibmcloudant.cloudant_v1'
[ -x "$SETTEE_BIN" ] || { echo "no settee binary at $SETTEE_BIN" >&2; exit 1; }

log="$(mktemp "${TMPDIR:-/tmp}/settee-compat-cloudant.XXXXXX")"
trap 'rm -f "$log"' EXIT
status=0
.venv/bin/python -m pytest -p no:cacheprovider -q -rfE 2>&1 | tee "$log" || status=$?
count="$(grep -Eo '[0-9]+ passed' "$log" | tail -1 | cut -d' ' -f1 || true)"
if [ "$status" != 0 ] || [ "${count:-0}" -eq 0 ]; then
  echo "compat-cloudant FAILED (exit $status; ${count:-0} passed)" >&2
  exit 1
fi
echo "== compat-cloudant: $count tests passed"
