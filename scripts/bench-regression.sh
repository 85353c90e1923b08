#!/usr/bin/env bash
# Throughput of this build against an older settee binary, side by side in one run: the two
# lead comparisons (scripts/bench-http-vs-pouchdb.sh and scripts/bench-kv-vs-memcached.sh, each
# with its competitor) run for both binaries, ROUNDS times, in alternating order (old first on
# odd rounds), with this build's load generator for both. It prints each measurement's median
# for both binaries and new/old, and the competitors' medians.
#
#   scripts/bench-regression.sh OLD_SETTEE_BINARY
#   ROUNDS=5 scripts/bench-regression.sh /work/base/settee-30733d8
#
# Environment (all optional): SETTEE_BIN (the new binary, default the release build),
# ROUNDS (default 3), and the two scripts' own variables (DURATION, CONNECTIONS, ...).
# CONNECTIONS means the KV script's list; the HTTP script keeps its default.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
old=${1:?usage: scripts/bench-regression.sh OLD_SETTEE_BINARY}
new=${SETTEE_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/settee/target}/release/settee}
rounds=${ROUNDS:-3}
kv_connections=${CONNECTIONS:-1 16 64}
# The scripts' own ROUNDS would repeat each measurement inside a round: the rounds here are
# what alternate the binaries.
unset CONNECTIONS ROUNDS
for bin in "$old" "$new"; do
    [[ -x $bin ]] || { echo "bench-regression: no executable at $bin" >&2; exit 1; }
done

out=$(mktemp -d "${TMPDIR:-/tmp}/settee-bench-regression.XXXXXX")
trap 'rm -rf "$out"' EXIT
# measurements.tsv: label (old|new|pouchdb|memcached), measurement, round, ops/s
results=$out/measurements.tsv
: >"$results"

run_binary() {
    local label=$1 bin=$2 round=$3
    echo "bench-regression: round $round, $label ($bin)" >&2
    SETTEE_BIN=$bin BENCH_CMD="$new bench http" "$root/scripts/bench-http-vs-pouchdb.sh" \
        >"$out/http-$label-$round.txt"
    # rows: server phase ops/s p50 p99 p999 errors
    awk -v label="$label" -v round="$round" '
        $1 == "settee" { print label "\thttp " $2 "\t" round "\t" $3 }
        $1 == "pouchdb" && label == "new" { print "pouchdb\thttp " $2 "\t" round "\t" $3 }
    ' "$out/http-$label-$round.txt" >>"$results"
    SETTEE_BIN=$bin SKIP_BUILD=1 BENCH_CMD="$new bench kv" CONNECTIONS="$kv_connections" \
        "$root/scripts/bench-kv-vs-memcached.sh" >"$out/kv-$label-$round.txt"
    # rows: round server conns ops/s ...
    awk -v label="$label" -v round="$round" '
        $2 == "settee" && $1 ~ /^[0-9]+$/ { print label "\tkv get " $3 " conns\t" round "\t" $4 }
        $2 == "memcached" && $1 ~ /^[0-9]+$/ && label == "new" {
            print "memcached\tkv get " $3 " conns\t" round "\t" $4
        }
    ' "$out/kv-$label-$round.txt" >>"$results"
}

for round in $(seq 1 "$rounds"); do
    if ((round % 2)); then
        run_binary old "$old" "$round"
        run_binary new "$new" "$round"
    else
        run_binary new "$new" "$round"
        run_binary old "$old" "$round"
    fi
done

echo "old: $old"
echo "new: $new ($(git -C "$root" rev-parse --short HEAD))"
echo "$rounds round(s), alternating order; medians of ops/s; $(nproc) CPUs shared by client and server"
echo "ops/s per round:"
sort -t$'\t' -k2,2 -k1,1 -k3,3n "$results" | awk -F'\t' '
    { key = $2 " " $1; if (key != last) { if (last != "") print line; line = sprintf("  %-28s", key); last = key }
      line = line sprintf(" %10.0f", $4) }
    END { if (last != "") print line }'
awk -F'\t' '
    function median(key,    k, i, j, v, tmp) {
        k = count[key]
        if (k == 0) return 0
        for (i = 1; i <= k; i++) v[i] = rate[key, i]
        for (i = 2; i <= k; i++)
            for (j = i; j > 1 && v[j - 1] > v[j]; j--) { tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp }
        return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    {
        key = $1 SUBSEP $2
        rate[key, ++count[key]] = $4
        if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 }
    }
    END {
        printf "%-18s %12s %12s %9s %12s\n", "measurement", "old ops/s", "new ops/s", "new/old",
            "competitor"
        for (i = 1; i <= n; i++) {
            m = order[i]
            o = median("old" SUBSEP m); w = median("new" SUBSEP m)
            c = median("pouchdb" SUBSEP m); if (c == 0) c = median("memcached" SUBSEP m)
            printf "%-18s %12.0f %12.0f %8.3fx %12.0f\n", m, o, w, (o > 0 ? w / o : 0), c
        }
    }' "$results"
