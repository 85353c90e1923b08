#!/usr/bin/env bash
# One connection's throughput with HELLO UnorderedExecution against the same connection
# without it (issue 4), on a CPU-heavy mix: 16-path hard lookups on the 130-sub-key document
# (3.9 KB, under the structural-index threshold, so every lookup walks it), 200 requesters.
# Each round starts a fresh server and data directory, warms it up, then runs the unordered
# and the ordered connection back to back; prints each round's ratio and the median.
#
#   scripts/bench-subdoc-unordered.sh BINARY [ROUNDS]
#
# REPEAT (default 600) sets the blocking requests per requester.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 1 ]] || { echo "usage: $0 BINARY [ROUNDS]" >&2; exit 2; }
binary=$1
rounds=${2:-8}
repeat=${REPEAT:-600}

bench_scratch subdoc-unordered

# rps MODE_FLAGS...: one measured run against the current server, prints its subdoc rps.
rps() {
    "$binary" bench subdoc subdoc --no-load "$@" --addr "127.0.0.1:$kv_port" --user admin \
        --password secret --keys 130 --search-keys 16 --difficulty hard --parallel 200 \
        --repeat "$repeat" 2>/dev/null | awk '$1 == "subdoc" {print $2}'
}

: >"$tmp/ratios"
for round in $(seq "$rounds"); do
    rm -rf "$tmp/data"
    start_settee "$binary" "$tmp/data" "$tmp/settee.log" || exit 1
    curl -fsS -u admin:secret -X PUT "http://127.0.0.1:$http_port/default" >/dev/null
    # Stores the document and warms the row cache.
    "$binary" bench subdoc subdoc --addr "127.0.0.1:$kv_port" --user admin --password secret \
        --keys 130 --search-keys 16 --difficulty hard --parallel 10 --repeat 10 >/dev/null 2>&1
    unordered=$(rps)
    ordered=$(rps --ordered)
    [[ -n $unordered && -n $ordered ]] || { echo "a run failed" >&2; exit 1; }
    kill -0 "$pid" 2>/dev/null || { echo "the server died during the run" >&2; exit 1; }
    stop_settee
    ratio=$(awk -v u="$unordered" -v o="$ordered" 'BEGIN {printf "%.3f", u / o}')
    echo "round $round: unordered $unordered rps, ordered $ordered rps, ${ratio}x"
    echo "$ratio" >>"$tmp/ratios"
done
sort -n "$tmp/ratios" |
    awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "median unordered/ordered %.3fx over %d rounds\n", m, NR}'
