#!/usr/bin/env bash
# Issue 19's benchmarks, on one settee node, in one run:
#  1. KV GET and HTTP GET/PUT on a non-default collection against `_default._default`, in
#     alternating rounds (KV: bucket `coll`'s default collection and its collection s.c, the
#     same keys loaded into both once before the rounds, so that no round measures the
#     compaction of another's load; HTTP: two new buckets each round N, `dflt_rN` measured on
#     its `_default` and `coll_rN` on its collection s.c, so that both sides have the same
#     history); before each measurement the script waits until RocksDB runs no flush or
#     compaction, so that neither side pays for the compaction of the other's writes;
#     prints each side's median and collection/default.
#  2. Dropping a collection of DROP_DOCS documents (default 1,000,000) while a KV GET load runs
#     on `_default`: the DELETE's answer time, the time until the data directory is back to
#     its size before the load (the purge and its compaction done), and the foreground
#     load's p99 before and during the purge.
#
#   scripts/bench-collections.sh
#   ROUNDS=5 DURATION=10 DROP_DOCS=200000 scripts/bench-collections.sh
#
# Environment (all optional): SETTEE_BIN, ROUNDS (3), DURATION (8 s per measurement),
# CONNECTIONS (16, KV), DROP_DOCS (1000000; 0 skips part 2), SKIP_BUILD.
set -euo pipefail
settee_bin_override=${SETTEE_BIN:-}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SETTEE_BIN=${settee_bin_override:-$SETTEE_BIN}
rounds=${ROUNDS:-3}
duration=${DURATION:-8}
connections=${CONNECTIONS:-16}
drop_docs=${DROP_DOCS:-1000000}

bench_scratch bench-collections
mkdir -p "$tmp/data"
start_settee "$SETTEE_BIN" "$tmp/data" "$tmp/settee.log"
http="http://127.0.0.1:$http_port"
mgmt="http://127.0.0.1:$mgmt_port"
curl -fsS -u admin:secret -X PUT "$http/dflt" >/dev/null
curl -fsS -u admin:secret -X PUT "$http/coll" >/dev/null
curl -fsS -u admin:secret -X PUT "$http/coll\$s\$c" >/dev/null

results=$tmp/results.tsv
: >"$results"
# kv_get LABEL BUCKET [COLLECTION]: one KV GET measurement of the keys loaded below.
kv_get() {
    local label=$1 bucket=$2 collection=${3:-}
    local flags=(--addr "127.0.0.1:$kv_port" --user admin --password secret --bucket "$bucket"
        --connections "$connections" --duration "$duration" --no-load --json)
    [[ -z $collection ]] || flags+=(--collection "$collection")
    "$SETTEE_BIN" bench kv "${flags[@]}" 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    phase = json.loads(line)
    if phase["name"] == "get":
        print("%s\tkv get\t%.0f\t%d" % (sys.argv[1], phase["ops_per_sec"], phase["p99_us"]))' "$label" >>"$results"
}
# http_run LABEL DB: the HTTP GET and PUT phases.
http_run() {
    local label=$1 db=$2
    "$SETTEE_BIN" bench http --url "$http" --user admin --password secret --db "$db" \
        --duration-secs "$duration" --json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    phase = json.loads(line)
    print("%s\thttp %s\t%.0f\t%d" % (sys.argv[1], phase["name"], phase["ops_per_sec"], phase["p99_us"]))' "$label" >>"$results"
}

# quiesce: wait (up to 120 s) until RocksDB has run no flush or compaction for three samples
# in a row (1.5 s). Its pending-compaction estimate is not the signal: it can stay above zero
# for minutes with nothing scheduled, which made every wait here run to its 120 s.
quiesce() {
    local running idle=0
    for _ in $(seq 1 240); do
        running=$(curl -fsS -u admin:secret "$http/_node/_local/_prometheus" |
            awk '/^settee_rocksdb_background_jobs_running/ {print $2}')
        if [[ ${running:-0} == 0 ]]; then
            idle=$((idle + 1))
            ((idle < 3)) || return 0
        else
            idle=0
        fi
        sleep 0.5
    done
    echo "bench-collections: RocksDB still busy ($running jobs) after 120 s" >&2
}

# The KV keys, once per side, then a pause for the flushes and compactions they cause.
for collection in "" s.c; do
    load_flags=(--addr "127.0.0.1:$kv_port" --user admin --password secret --bucket coll
        --duration 1 --warmup 0 --json)
    [[ -z $collection ]] || load_flags+=(--collection "$collection")
    "$SETTEE_BIN" bench kv "${load_flags[@]}" >/dev/null 2>&1
done
sleep 5

for round in $(seq 1 "$rounds"); do
    echo "bench-collections: round $round" >&2
    if ((round % 2)); then order=(default collection); else order=(collection default); fi
    for side in "${order[@]}"; do
        # bench http deletes and re-creates its database: a fresh name each round, so that
        # neither side measures the clean-up of the last round's (a bucket's DeleteRange, a
        # dropped collection's background purge).
        if [[ $side == default ]]; then
            quiesce
            kv_get default coll
            quiesce
            http_run default "dflt_r$round"
        else
            quiesce
            kv_get collection coll s.c
            curl -fsS -u admin:secret -X PUT "$http/coll_r$round" >/dev/null
            quiesce
            http_run collection "coll_r$round\$s\$c"
        fi
    done
done

echo "== GET/PUT: collection s.c vs _default._default (median of $rounds rounds, ops/s)"
python3 - "$results" <<'EOF'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
kinds = sorted({row[1] for row in rows})
print(f"{'measurement':<12} {'_default':>10} {'collection':>11} {'ratio':>6} {'p99 default/coll us':>22}")
for kind in kinds:
    side = {label: [float(r[2]) for r in rows if r[0] == label and r[1] == kind] for label in ("default", "collection")}
    p99 = {label: [float(r[3]) for r in rows if r[0] == label and r[1] == kind] for label in ("default", "collection")}
    d, c = statistics.median(side["default"]), statistics.median(side["collection"])
    print(f"{kind:<12} {d:>10.0f} {c:>11.0f} {c / d:>6.3f} {statistics.median(p99['default']):>10.0f}/{statistics.median(p99['collection']):.0f}")
# Each round measures both sides back to back: the ratio within a round cancels the drift of
# the machine between rounds, so its median is the steadier figure.
print("paired (collection/default within each round): median, min, max")
for kind in kinds:
    ratios = [c / d for d, c in zip(
        [float(r[2]) for r in rows if r[0] == "default" and r[1] == kind],
        [float(r[2]) for r in rows if r[0] == "collection" and r[1] == kind])]
    print(f"{kind:<12} {statistics.median(ratios):.3f} {min(ratios):.3f} {max(ratios):.3f}")
EOF
((drop_docs > 0)) || exit 0

echo "== dropping a collection of $drop_docs documents under a KV GET load on _default"
# A bucket of its own: its size (GET /dropb, sizes.file: SST and memtable bytes in its key
# range) moves with this collection only.
curl -fsS -u admin:secret -X PUT "$http/dropb" >/dev/null
curl -fsS -u admin:secret -X PUT "$http/dropb\$s\$big" >/dev/null
bucket_bytes() {
    curl -fsS -u admin:secret "$http/dropb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sizes"]["file"])'
}
kv() {
    "$SETTEE_BIN" bench kv --addr "127.0.0.1:$kv_port" --user admin --password secret --bucket dropb "$@"
}
# The foreground's keys in _default, then the collection's documents.
kv --duration 1 --warmup 0 --json >/dev/null 2>&1
before=$(bucket_bytes)
kv --collection s.big --keys "$drop_docs" --duration 1 --warmup 0 --json >/dev/null 2>&1
loaded=$(bucket_bytes)
fg() {
    kv --no-load --connections "$connections" --duration "$1" --json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    p = json.loads(line)
    if p["name"] == "get": print("%.0f %d" % (p["ops_per_sec"], p["p99_us"]))'
}
read -r base_ops base_p99 < <(fg "$duration")
fg $((duration * 3)) >"$tmp/fg-during.txt" &
fg_pid=$!
sleep 2
start_ns=$(date +%s%N)
curl -fsS -u admin:secret -X DELETE "$mgmt/pools/default/buckets/dropb/scopes/s/collections/big" >/dev/null
answered_ns=$(date +%s%N)
reclaimed_s=""
for _ in $(seq 1 1200); do
    if (($(bucket_bytes) <= before + (loaded - before) / 10)); then
        reclaimed_s=$(python3 -c "print('%.1f' % (($(date +%s%N) - $start_ns) / 1e9))")
        break
    fi
    sleep 0.5
done
wait "$fg_pid"
read -r during_ops during_p99 <"$tmp/fg-during.txt"
printf 'bucket dropb: %d MB before the collection, %d MB with it loaded, %d MB at the end\n' \
    $((before >> 20)) $((loaded >> 20)) $(($(bucket_bytes) >> 20))
printf 'DELETE answered in %.1f ms; 90%% of the collection'"'"'s bytes gone after %s s\n' \
    "$(python3 -c "print(($answered_ns - $start_ns) / 1e6)")" "${reclaimed_s:-(not within 600 s)}"
printf 'foreground KV GET on _default: %s ops/s p99 %s us before; %s ops/s p99 %s us during the purge\n' \
    "$base_ops" "$base_p99" "$during_ops" "$during_p99"
