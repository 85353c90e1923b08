#!/usr/bin/env bash
# The chaos test in CI's short form: 22 fault rounds (every fault kind: kill -9 of nodes holding
# active vbuckets and of the Raft leader, pauses, network partitions in namespaces the program
# makes) with a 1 s auto-failover timeout against a real 3-node settee cluster ($SETTEE_BIN),
# gocb clients checked by porcupine; about 2.5 minutes on 2 cores. Exits
# non-zero if a history is not linearizable (or the checker timed out), if an acknowledged
# write was lost, if a check failed, or if nothing ran. Extra arguments go to the program
# (scripts/chaos --help lists them). Works unattended (CI=true, no stdin) on a fresh clone.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export SETTEE_BIN="${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}"
source "$HERE/../../scripts/go-toolchain.sh"
if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi
install_go "$HERE"
cd "$HERE"
# Built, then exec'ed rather than `go run`: SIGINT/SIGTERM then reach the program itself, which
# stops every node it started.
binary="$HOME/.cache/settee/chaos/settee-chaos"
mkdir -p "$(dirname "$binary")"
go build -o "$binary" .
exec "$binary" --rounds 22 --failover-timeout 1 --check-timeout 2m "$@" </dev/null
