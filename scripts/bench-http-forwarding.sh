#!/usr/bin/env bash
# HTTP GET and PUT of single documents through a node that is not their active (forwarded over
# the cluster port) against the same requests through the active, on a 2-node cluster.
#
#   scripts/bench-http-forwarding.sh [ROUNDS]
#
# The bucket has one vbucket and no replica (`q=1&n=1`), so every document's active is the
# same node A and every request through the other node B is forwarded. `settee bench http`
# creates and preloads the bucket through A, then each round runs the GET and PUT phases
# through A and through B on the same documents (--reuse-db), paired so a slow spell of the
# machine hits both. Prints each phase's line and, per round, B's throughput over A's.
# BENCH_SECS (default 10), BENCH_CONNECTIONS (default 16), SETTEE_NO_BUILD=1 as scripts/cluster.
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-3}
SECS=${BENCH_SECS:-10}
CONNECTIONS=${BENCH_CONNECTIONS:-16}
export SETTEE_CLUSTER_DIR="${TMPDIR:-/tmp}/settee-bench-forwarding"
"$ROOT/scripts/cluster" down >/dev/null
trap '"$ROOT/scripts/cluster" down >/dev/null' EXIT
"$ROOT/scripts/cluster" up 2 >/dev/null
http_of() { sed -n 's/^http=//p' "$SETTEE_CLUSTER_DIR/node$1/node"; }
id_of() { sed -n 's/^id=//p' "$SETTEE_CLUSTER_DIR/node$1/node"; }

bench() { # URL MODE SECONDS [extra flags]
  local url=$1 mode=$2 seconds=$3
  shift 3
  "$SETTEE_BIN" bench http --url "http://admin:secret@$url" --db bench --mode "$mode" \
    --connections "$CONNECTIONS" --duration-secs "$seconds" --docs 10000 --json "$@" 2>/dev/null
}
active_node() { # which node (1 or 2) holds the bucket's one vbucket
  local actives
  actives=$(curl -s -u admin:secret "http://$(http_of 1)/_node/_local/_cluster")
  for k in 1 2; do
    if python3 -c "import json,sys; b=[b for b in json.loads(sys.argv[1])['buckets'] if b['name']=='bench'][0]; sys.exit(0 if b['actives'].get(sys.argv[2]) else 1)" "$actives" "$(id_of $k)"; then
      echo "$k"; return
    fi
  done
  echo "no active for the bench bucket" >&2; exit 1
}
throughput() { python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['ops_per_sec'])"; }

# Created through node 1 to learn the active, then recreated and preloaded through it.
curl -s -u admin:secret -X PUT "http://$(http_of 1)/bench?q=1&n=1" >/dev/null
A=$(active_node)
bench "$(http_of "$A")" get 1 --create-params 'q=1&n=1' >/dev/null
A2=$(active_node)
[[ $A == "$A2" ]] || { echo "the active moved on recreate: node$A -> node$A2" >&2; exit 1; }
B=$((3 - A))
echo "active node$A ($(http_of "$A")), front node$B ($(http_of "$B")); $CONNECTIONS connections, $SECS s phases"
for ((round = 1; round <= ROUNDS; round++)); do
  for mode in get put; do
    a=$(bench "$(http_of "$A")" "$mode" "$SECS" --reuse-db)
    b=$(bench "$(http_of "$B")" "$mode" "$SECS" --reuse-db)
    echo "round $round $mode via active:    $a"
    echo "round $round $mode via non-active: $b"
    echo "round $round $mode ratio non-active/active: $(python3 -c "print(round($(echo "$b" | throughput)/$(echo "$a" | throughput), 3))")"
  done
done
