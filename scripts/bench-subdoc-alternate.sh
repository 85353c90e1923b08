#!/usr/bin/env bash
# The subdoc/regular ratio of seed 000 (`settee bench subdoc both`, 10,000 sub-keys, 10 hard
# paths, 200 requesters) for two settee binaries in alternating rounds, each run on its own
# fresh server and data directory, so a before/after comparison is not decided by the
# machine's drift during the day. Prints one line per run and the medians.
#
#   scripts/bench-subdoc-alternate.sh OLD_BINARY NEW_BINARY [ROUNDS]
#
# The load generator is NEW_BINARY's `bench subdoc` for both. REPEAT (default 2000) sets the
# blocking requests per requester.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2; exit 2; }
old=$1
new=$2
rounds=${3:-7}
repeat=${REPEAT:-2000}

bench_scratch subdoc-alternate

# run_one BINARY: starts BINARY on fresh ports and data, prints the bench's ratio line.
run_one() {
    local binary=$1
    rm -rf "$tmp/data"
    start_settee "$binary" "$tmp/data" "$tmp/settee.log" || exit 1
    curl -fsS -u admin:secret -X PUT "http://127.0.0.1:$http_port/default" >/dev/null
    "$new" bench subdoc both --addr "127.0.0.1:$kv_port" --user admin --password secret \
        --keys 10000 --search-keys 10 --difficulty hard --parallel 200 --repeat "$repeat" \
        2>/dev/null | tail -n 1
    kill -0 "$pid" 2>/dev/null || { echo "the server died during the run" >&2; exit 1; }
    stop_settee
}

: >"$tmp/ratios"
for round in $(seq "$rounds"); do
    for which in old new; do
        binary=$old
        [[ $which == new ]] && binary=$new
        line=$(run_one "$binary")
        echo "round $round $which: $line"
        echo "$which ${line#*: }" | awk '{print $1, $2}' | tr -d x >>"$tmp/ratios"
    done
done
for which in old new; do
    awk -v w="$which" '$1 == w {print $2}' "$tmp/ratios" | sort -n |
        awk -v w="$which" '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s: median subdoc/regular %.3fx over %d runs\n", w, m, NR}'
done
