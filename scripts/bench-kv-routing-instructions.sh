#!/usr/bin/env bash
# Instructions per KV GET of one server binary, under callgrind, counting only the GET phase
# (4 connections x 16 in flight, 15 s, 2,000 keys of 200 bytes); exact where ops/s on the 2
# shared cores swing by 10-20%. The client is $BENCH_BIN (default: the build's settee).
#   scripts/bench-kv-routing-instructions.sh BIN single|cluster
# `cluster` starts BIN as a one-node cluster, so its bucket is in the cluster map and every
# KV request takes the routing check (BENCHMARKS.md, "KV routing by the cluster map").
set -euo pipefail
BENCH_BIN=${BENCH_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/settee/target}/release/settee}
BIN=$1; MODE=$2
dir=$(mktemp -d /tmp/cg-rt.XXXXXX)
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
H=$(free); K=$(free); M=$(free); C=$(free)
args=(serve --data-dir "$dir/data" --http-addr 127.0.0.1:$H --kv-addr 127.0.0.1:$K --mgmt-addr 127.0.0.1:$M --admin admin:secret)
if [[ $MODE == cluster ]]; then args+=(--cluster-addr 127.0.0.1:$C); export SETTEE_CLUSTER_SECRET=benchsecretbenchsecret; fi
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" "$BIN" "${args[@]}" >"$dir/log" 2>&1 &
pid=$!
until grep -q "couchbase kv on" "$dir/log" 2>/dev/null; do kill -0 $pid || { tail "$dir/log"; exit 1; }; sleep 0.5; done
curl -s -u admin:secret -X PUT "http://127.0.0.1:$H/default" >/dev/null
"$BENCH_BIN" bench kv --addr 127.0.0.1:$K --user admin --password secret --bucket default --keys 2000 --duration 0 >/dev/null 2>&1
callgrind_control -i on $pid >/dev/null
"$BENCH_BIN" bench kv --addr 127.0.0.1:$K --user admin --password secret --bucket default --keys 2000 --no-load --connections 4 --pipeline 16 --duration 15 --json 2>/dev/null | grep '"get"' > "$dir/get.json"
callgrind_control -i off $pid >/dev/null
kill $pid; wait $pid 2>/dev/null || true
sleep 2; ops=$(python3 -c "import json; print(json.load(open('$dir/get.json'))['ops'])")
ir=$(callgrind_annotate "$dir/cg.out" 2>/dev/null | awk '/PROGRAM TOTALS/ && !d {gsub(",","",$1); print $1; d=1}')
echo "$BIN $MODE ops=$ops Ir=$ir per_get=$(python3 -c "print(round($ir/$ops))")"
rm -rf "$dir"
