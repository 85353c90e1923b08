#!/usr/bin/env bash
# Instructions per HTTP request of one server binary, under callgrind, counting only the
# measured phase (4 connections, 15 s; GET reads 2,000 preloaded documents of 200 bytes); exact
# where ops/s and even CPU per request on the 2 shared cores move by several percent. The client
# is $BENCH_BIN (default: the build's settee); MODE is get (default) or put.
#   scripts/bench-http-instructions.sh BIN [BIN...]
# Prints one line per binary: requests measured, instructions, instructions per request.
set -euo pipefail
BENCH_BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/settee/target}/release/settee}
mode=${MODE:-get}
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
for bin in "$@"; do
    dir=$(mktemp -d /tmp/cg-http.XXXXXX)
    H=$(free); K=$(free); M=$(free)
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" "$bin" serve \
        --data-dir "$dir/data" --http-addr 127.0.0.1:$H --kv-addr 127.0.0.1:$K \
        --mgmt-addr 127.0.0.1:$M --admin admin:secret >"$dir/log" 2>&1 &
    pid=$!
    until curl -fs "http://127.0.0.1:$H/" >/dev/null 2>&1; do
        kill -0 $pid || { tail "$dir/log"; exit 1; }
        sleep 0.5
    done
    url="http://admin:secret@127.0.0.1:$H"
    # Create and preload with a zero-length phase, then measure on the same documents.
    "$BENCH_BIN" bench http --url "$url" --docs 2000 --mode get --duration-secs 0 >/dev/null 2>&1
    callgrind_control -i on $pid >/dev/null
    "$BENCH_BIN" bench http --url "$url" --docs 2000 --mode "$mode" --reuse-db --connections 4 \
        --duration-secs 15 --json 2>/dev/null | grep "\"$mode\"" >"$dir/phase.json"
    callgrind_control -i off $pid >/dev/null
    kill $pid
    wait $pid 2>/dev/null || true
    ops=$(python3 -c "import json; print(json.load(open('$dir/phase.json'))['ops'])")
    ir=$(callgrind_annotate "$dir/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !d {gsub(",","",$1); print $1; d=1}')
    echo "$bin $mode requests=$ops Ir=$ir per_request=$(python3 -c "print(round($ir/$ops))")"
    [[ -n ${KEEP:-} ]] && echo "kept $dir/cg.out" || rm -rf "$dir"
done
