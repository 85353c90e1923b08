#!/usr/bin/env bash
# Seed 000's sweeps with `settee bench subdoc` against one settee started here: requests/s of
# 10-path (or N-path) sub-document lookups by document size and by number of searched paths,
# for each difficulty, next to the regular GET of a ~200-byte document; then PNG plots like the
# article's (scripts/plot-subdoc-sweep.py, matplotlib in a venv this script creates).
#
#   scripts/bench-subdoc-sweep.sh                 # CSV and PNGs into docs/bench/
#   OUT=/tmp/sweep REPEAT=200 scripts/bench-subdoc-sweep.sh
#
# Environment (all optional):
#   OUT          output directory (default docs/bench)
#   SIZES        sub-keys per document for the size sweep (default "100 1000 5000 10000")
#   SEARCH_KEYS  paths per lookup for the second sweep (default "1 2 4 8 16")
#   PARALLEL     concurrent requesters (default 200)
#   REPEAT       blocking requests per requester per point (default 200)
#   SKIP_BUILD   1: use $CARGO_TARGET_DIR/release/settee as it is
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out=${OUT:-$ROOT/docs/bench}
sizes=${SIZES:-100 1000 5000 10000}
search_keys_list=${SEARCH_KEYS:-1 2 4 8 16}
parallel=${PARALLEL:-200}
repeat=${REPEAT:-200}
difficulties="easy medium hard impossible"

log() { echo "bench-subdoc-sweep: $*" >&2; }
[[ ${SKIP_BUILD:-0} == 1 ]] || build_release

bench_scratch subdoc-sweep

start_settee "$SETTEE_BIN" "$tmp/data" "$tmp/settee.log"
curl -fsS -u admin:secret -X PUT "http://127.0.0.1:$http_port/default" >/dev/null

# point MODE KEYS SEARCH DIFFICULTY: prints "ops_per_sec errors" of the measured phase.
point() {
    local line
    line=$("$SETTEE_BIN" bench subdoc "$1" --addr "127.0.0.1:$kv_port" --user admin \
        --password secret --keys "$2" --search-keys "$3" --difficulty "$4" \
        --parallel "$parallel" --repeat "$repeat" --json 2>>"$tmp/bench.log" | tail -n 1)
    if [[ $line != *'"ops_per_sec"'* ]]; then
        log "no result from bench subdoc $*; its log:"
        tail -n 20 "$tmp/bench.log" >&2
        exit 1
    fi
    local rps errors
    rps=$(sed -n 's/.*"ops_per_sec":\([0-9.e+]*\).*/\1/p' <<<"$line")
    errors=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' <<<"$line")
    if [[ $errors != 0 ]]; then
        log "bench subdoc $* answered $errors errors (does the server support SUBDOC_MULTI_LOOKUP?)"
        exit 1
    fi
    echo "$rps"
}

mkdir -p "$out"
csv="$out/subdoc-sweep.csv"
echo "sweep,mode,keys,search_keys,difficulty,rps" >"$csv"
regular=$(point regular 5 1 easy)
echo "baseline,regular,5,1,none,$regular" >>"$csv"
log "regular GET of the 5-key document: $regular rps"
for keys in $sizes; do
    for difficulty in $difficulties; do
        rps=$(point subdoc "$keys" 10 "$difficulty")
        echo "size,subdoc,$keys,10,$difficulty,$rps" >>"$csv"
        log "keys=$keys search=10 $difficulty: $rps rps"
    done
done
for search in $search_keys_list; do
    for difficulty in $difficulties; do
        rps=$(point subdoc 10000 "$search" "$difficulty")
        echo "search,subdoc,10000,$search,$difficulty,$rps" >>"$csv"
        log "keys=10000 search=$search $difficulty: $rps rps"
    done
done
log "results: $csv"

venv="$HOME/.cache/settee/plot-venv"
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib into $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check matplotlib
fi
"$venv/bin/python" "$ROOT/scripts/plot-subdoc-sweep.py" "$csv" "$out"
