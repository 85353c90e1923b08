#!/usr/bin/env bash
# Server CPU time per HTTP request, for comparing two settee binaries where throughput rounds
# are too noisy to settle a few percent (2 cores shared by client and server). For each binary,
# ROUNDS times, alternating: a fresh node, `settee bench http --mode MODE` (this build's load
# generator), then the server's user + system CPU ticks over the run (preload included) divided
# by the requests of the measured phase. Prints one line per run: binary, µs of CPU per request.
#
#   scripts/bench-cpu-per-request.sh OLD_BINARY [NEW_BINARY]     # MODE=get ROUNDS=2 DURATION=10
# BENCH_CLIENT names another binary to run the load (default: NEW_BINARY), for comparing builds
# that are not this one (an allocator preloaded by a wrapper script, say).
set -euo pipefail
old=${1:?usage: scripts/bench-cpu-per-request.sh OLD_BINARY [NEW_BINARY]}
new=${2:-${CARGO_TARGET_DIR:-$HOME/.cache/settee/target}/release/settee}
mode=${MODE:-get}
rounds=${ROUNDS:-2}
duration=${DURATION:-10}
port=${PORT:-25984}
dir=$(mktemp -d "${TMPDIR:-/tmp}/settee-cpu.XXXXXX")
server=
cleanup() { [[ -n $server ]] && kill "$server" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

for ((round = 1; round <= rounds; round++)); do
    for bin in "$old" "$new"; do
        rm -rf "$dir/data"
        "$bin" serve --data-dir "$dir/data" --http-addr "127.0.0.1:$port" \
            --kv-addr "127.0.0.1:$((port + 1))" --mgmt-addr "127.0.0.1:$((port + 3))" \
            --admin admin:secret >"$dir/server.log" 2>&1 &
        server=$!
        for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/" >/dev/null && break; sleep 0.1; done
        "${BENCH_CLIENT:-$new}" bench http --url "http://admin:secret@127.0.0.1:$port" --mode "$mode" \
            --duration-secs "$duration" --json >"$dir/bench.json"
        stat=$(<"/proc/$server/stat")
        stat=${stat##*) }
        read -r -a fields <<<"$stat"
        ticks=$((fields[11] + fields[12]))
        kill "$server"
        wait "$server" 2>/dev/null || true
        server=
        ops=$(sed -n 's/.*"ops":\([0-9]*\).*/\1/p' "$dir/bench.json" | paste -sd+ | bc)
        hz=$(getconf CLK_TCK)
        echo "round $round $(basename "$bin") $mode: $ops requests, $(echo "scale=2; $ticks * 1000000 / $hz / $ops" | bc) us of server CPU per request"
    done
done
