#!/usr/bin/env bash
# The official Couchbase SDKs (Python `couchbase`, Node.js `couchbase`, Go `gocb`) against a real
# settee process. Installs the pinned SDKs idempotently (a second run installs nothing), then runs
# the three suites, each against one node and then against a 3-node cluster; each suite starts
# its own settee processes ($SETTEE_BIN). Exits non-zero if any test
# fails or if a suite ran no tests. Works unattended (CI=true, no stdin) on a fresh clone.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export SETTEE_BIN="${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}"
# install_go: the Go the module asks for, installed when no such Go is on the PATH.
source "$HERE/../../scripts/go-toolchain.sh"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/settee-compat-kv-logs.XXXXXX")"
trap 'rm -rf "$LOGS"' EXIT

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  echo "installing Debian packages: $*"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# --- installs ------------------------------------------------------------------------------

install_python() {
  local python=python3
  if ! command -v "$python" >/dev/null 2>&1 || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  cd "$HERE/python"
  local stamp=.venv/.requirements.sha256
  local wanted
  wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --only-binary couchbase -r requirements.txt
    echo "$wanted" > "$stamp"
  fi
  .venv/bin/python -c 'import couchbase.cluster, acouchbase.cluster'
}

install_node() {
  cd "$HERE/node"
  local stamp=node_modules/.package-lock.json
  if [ ! -d node_modules ] || [ package-lock.json -nt "$stamp" ]; then
    # --ignore-scripts: the native binding comes prebuilt in an optional dependency package
    # (@couchbase/couchbase-<platform>-napi); nothing needs compiling.
    npm ci --no-audit --no-fund --ignore-scripts
  fi
  node -e 'require("couchbase")' || { echo "the couchbase native binding does not load" >&2; return 1; }
}

# --- suites --------------------------------------------------------------------------------

failed=()

# check NAME COUNT STATUS: records the suite as failed if it failed or ran no tests.
check() {
  local name="$1" count="$2" status="$3"
  if [ "$status" != 0 ]; then
    failed+=("$name (exit $status; $count passed)")
  elif [ "$count" -eq 0 ]; then
    failed+=("$name (no tests ran)")
  else
    echo "== $name: $count tests passed"
  fi
}

# run_python [NODES]: the Python suite against one node, or against a NODES-node cluster
# (SETTEE_CLUSTER, conftest.py).
run_python() {
  local nodes="${1:-}" name=python
  [ -n "$nodes" ] && name="python, $nodes-node cluster"
  echo "== compat-kv: Python couchbase SDK${nodes:+ against a $nodes-node cluster}"
  local status=0
  (cd "$HERE/python" && SETTEE_CLUSTER="$nodes" .venv/bin/python -m pytest -p no:cacheprovider -q -rfE) 2>&1 | tee "$LOGS/python" || status=$?
  local count
  count="$(grep -Eo '[0-9]+ passed' "$LOGS/python" | tail -1 | cut -d' ' -f1 || true)"
  check "$name" "${count:-0}" "$status"
}

# run_node [NODES]: the Node suite against one node, or against a NODES-node cluster
# (SETTEE_CLUSTER, harness.js; four test files at once, each with its own cluster).
run_node() {
  local nodes="${1:-}" name=node
  [ -n "$nodes" ] && name="node, $nodes-node cluster"
  echo "== compat-kv: Node.js couchbase SDK${nodes:+ against a $nodes-node cluster}"
  local status=0 concurrency=()
  [ -n "$nodes" ] && concurrency=(--test-concurrency=4)
  (cd "$HERE/node" && SETTEE_CLUSTER="$nodes" node --test "${concurrency[@]}" --test-reporter=tap ./*.test.js) 2>&1 | tee "$LOGS/node" || status=$?
  local count
  count="$(grep -E '^# pass [0-9]+' "$LOGS/node" | tail -1 | cut -d' ' -f3 || true)"
  check "$name" "${count:-0}" "$status"
}

# run_go [NODES]: gocb's suite against one node, or against a NODES-node cluster
# (SETTEE_CLUSTER, cluster_test.go).
run_go() {
  local nodes="${1:-}" name=go
  [ -n "$nodes" ] && name="go, $nodes-node cluster"
  echo "== compat-kv: Go gocb SDK${nodes:+ against a $nodes-node cluster}"
  local status=0
  (cd "$HERE/go" && SETTEE_CLUSTER="$nodes" go test -count=1 -v ./...) 2>&1 | tee "$LOGS/go" || status=$?
  local count
  count="$(grep -cE '^\s*--- PASS' "$LOGS/go" || true)"
  check "$name" "${count:-0}" "$status"
}

if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi
(install_python)
(install_node)
install_go "$HERE/go"
run_python
run_python 3
run_node
run_node 3
run_go
run_go 3

if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat-kv FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "compat-kv: all suites passed"
