#!/usr/bin/env bash
# Couchbase's official Java DCP client (`com.couchbase.client:dcp-client`, the base of the Kafka
# and Elasticsearch connectors) against a real settee process ($SETTEE_BIN): streams from
# seqno 0, resumes from saved state, collection-aware streams. Installs a JDK 17 and Maven
# when missing (Debian packages); Maven fetches the pinned artifacts once into ~/.m2. Exits
# non-zero if a test fails or if no test ran. Works unattended (CI=true, no stdin).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export SETTEE_BIN="${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}"
LOG="$(mktemp "${TMPDIR:-/tmp}/settee-compat-dcp.XXXXXX")"
trap 'rm -f "$LOG"' EXIT

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

java_is_recent() {
  command -v java >/dev/null 2>&1 || return 1
  local major
  major="$(java -XshowSettings:properties -version 2>&1 | awk -F' = ' '/java.specification.version/ { print $2 }')"
  [ -n "$major" ] && [ "${major%%.*}" -ge 17 ]
}

if ! java_is_recent || ! command -v mvn >/dev/null 2>&1; then
  echo "installing Debian packages: openjdk-17-jdk-headless maven"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null
fi
if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi

status=0
(cd "$HERE" && mvn -B --no-transfer-progress test) 2>&1 | tee "$LOG" || status=$?
summary="$(grep -E '^\[(INFO|ERROR|WARNING)\] Tests run: [0-9]+, Failures' "$LOG" | tail -1 || true)"
ran="$(echo "$summary" | sed -nE 's/.*Tests run: ([0-9]+).*/\1/p')"
if [ "$status" != 0 ]; then
  echo "compat-dcp FAILED (exit $status): $summary" >&2
  exit 1
fi
if [ "${ran:-0}" -eq 0 ]; then
  echo "compat-dcp FAILED: no tests ran" >&2
  exit 1
fi
echo "compat-dcp: $ran tests passed"
