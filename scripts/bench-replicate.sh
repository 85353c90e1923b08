#!/usr/bin/env bash
# Issue 6's replication benchmark: 100,000 documents (1% with a 1 KiB attachment, plus
# updates, deletions and conflicts) pushed and pulled between two settee nodes with
# `settee bench replicate` (which compares the databases afterwards and fails if they differ),
# then pushed from and pulled into PouchDB (node, leveldb) against settee.
# Usage: scripts/bench-replicate.sh [docs]
source "$(dirname "$0")/lib.sh"
DOCS="${1:-100000}"
build_release
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start_node() { # name: starts a node in the background; its address goes to $work/name.addr
  local name="$1"
  mkdir -p "$work/$name"
  "$SETTEE_BIN" serve --data-dir "$work/$name" --http-addr 127.0.0.1:0 --kv-addr 127.0.0.1:0 \
    --mgmt-addr 127.0.0.1:0 --admin admin:secret >"$work/$name.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 100); do
    if grep -q "listening on http://" "$work/$name.log"; then break; fi
    sleep 0.1
  done
  grep -o "listening on http://[^ ]*" "$work/$name.log" | sed 's#listening on http://##' >"$work/$name.addr"
}

start_node a
start_node b
a="$(cat "$work/a.addr")"
b="$(cat "$work/b.addr")"
echo "== settee -> settee, push (node a runs the replication), $DOCS documents"
"$SETTEE_BIN" bench replicate --mode push --docs "$DOCS" \
  --source "http://admin:secret@$a/src" --target "http://admin:secret@$b/dst"
echo "== settee -> settee, pull (node b runs the replication), same documents"
"$SETTEE_BIN" bench replicate --mode pull --no-load --docs "$DOCS" \
  --source "http://admin:secret@$a/src" --target "http://admin:secret@$b/pulled"
echo "== PouchDB (leveldb) <-> settee, $DOCS documents"
(cd "$ROOT/tests/compat" && { [ -d node_modules ] || npm ci --no-audit --no-fund --ignore-scripts; })
NODE_PATH="$ROOT/tests/compat/node_modules" node "$ROOT/scripts/bench-replicate-pouchdb.js" \
  "http://$b" "$DOCS" "$work/pouch"
