#!/usr/bin/env bash
# Seed 001's experiment with `settee bench views`: full view-index build time, docs/s, CPU use
# and key/range/reduce query latency at 16, 64, 256 and 1024 vbuckets, ROUNDS times each (the
# machine is shared, so each vbucket count keeps its fastest round); then a PNG
# (scripts/plot-views-sweep.py, matplotlib in a venv this script creates).
#
#   scripts/bench-views-sweep.sh                  # JSON lines and PNG into docs/bench/
#   DOCS=800000 scripts/bench-views-sweep.sh      # seed 001's size (--full)
#
# Environment (all optional):
#   OUT         output directory (default docs/bench)
#   DOCS        documents (default 200000)
#   VBUCKETS    vbucket counts (default 16,64,256,1024)
#   ROUNDS      sweeps (default 2)
#   QUERIES     queries timed per kind (default 2000)
#   SKIP_BUILD  1: use $CARGO_TARGET_DIR/release/settee as it is
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out=${OUT:-$ROOT/docs/bench}
docs=${DOCS:-200000}
vbuckets=${VBUCKETS:-16,64,256,1024}
rounds=${ROUNDS:-2}
queries=${QUERIES:-2000}

log() { echo "bench-views-sweep: $*" >&2; }
[[ ${SKIP_BUILD:-0} == 1 ]] || build_release
mkdir -p "$out"
results="$out/views-sweep.jsonl"
: >"$results"
# One process per measurement: in one process, whichever vbucket count ran later measured
# queries up to 2x slower (the earlier runs' state), so the order, not the count, decided.
# Each round also starts from a different count.
IFS=, read -r -a counts <<<"$vbuckets"
for round in $(seq 1 "$rounds"); do
    log "round $round of $rounds: $docs documents, vbuckets $vbuckets"
    for step in "${!counts[@]}"; do
        count=${counts[$(((step + round - 1) % ${#counts[@]}))]}
        "$SETTEE_BIN" bench views --docs "$docs" --vbuckets "$count" --queries "$queries" --json \
            | sed "s/^{/{\"round\":$round,/" >>"$results"
    done
done
log "results in $results"

venv="$HOME/.cache/settee/plot-venv"
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
    log "installing matplotlib into $venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check matplotlib
fi
"$venv/bin/python" "$ROOT/scripts/plot-views-sweep.py" "$results" "$out/views-by-vbuckets.png"
log "plot in $out/views-by-vbuckets.png"
