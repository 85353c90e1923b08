#!/usr/bin/env bash
# Side-by-side HTTP throughput of settee and pouchdb-server, measured with the same load generator
# (`settee bench http`, crates/bench) and the same parameters, one server after the other.
#
#   scripts/bench-http-vs-pouchdb.sh
#   DURATION=30 CONNECTIONS=128 DOCS=100000 scripts/bench-http-vs-pouchdb.sh
#
# Environment (all optional):
#   SETTEE_BIN      settee binary (default ~/.cache/settee/target/release/settee)
#   BENCH_CMD       load generator command line (default "$SETTEE_BIN bench http"); e.g. the
#                   example binary: "$CARGO_TARGET_DIR/release/examples/http"
#   SERVERS         which servers to measure, in order (default "settee pouchdb")
#   DURATION        seconds per phase (default 10)
#   CONNECTIONS     concurrent keep-alive connections (default 64)
#   DOCS            documents preloaded for the GET phase (default 10000)
#   DOC_SIZE_BYTES  JSON size of each document (default 200)
#
# pouchdb-server (pinned in bench/pouchdb-server/package.json) runs on its default on-disk
# LevelDB backend, not --in-memory, so PUTs are compared with durable-ish writes on both sides. It
# runs in "admin party" (no admins), so no credentials are sent to it; settee gets
# --admin admin:password. Each server is stopped as soon as its run is over, so background work
# it left (compaction) does not steal the CPU from the next one.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
settee_bin=${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}
bench_cmd=${BENCH_CMD:-"$settee_bin bench http"}
servers=${SERVERS:-settee pouchdb}
duration=${DURATION:-10}
connections=${CONNECTIONS:-64}
docs=${DOCS:-10000}
doc_size_bytes=${DOC_SIZE_BYTES:-200}

pouchdb_dir=$root/bench/pouchdb-server
pouchdb_port=5985
settee_port=5986
# How long a server may take to answer its first request.
startup_timeout_secs=60

tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-bench-http.XXXXXX")
declare -A server_pids=()

stop_server() {
    local name=$1 pid=${server_pids[$1]:-}
    [[ -n $pid ]] || return 0
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "server_pids[$name]"
}

cleanup() {
    local name
    for name in "${!server_pids[@]}"; do
        stop_server "$name"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench-http-vs-pouchdb: $*" >&2; }

# wait_up NAME URL: polls URL until it answers 2xx, the server dies, or the timeout passes.
wait_up() {
    local name=$1 url=$2 deadline=$((SECONDS + startup_timeout_secs))
    until curl -fsS -o /dev/null "$url" 2>/dev/null; do
        if ! kill -0 "${server_pids[$name]}" 2>/dev/null; then
            log "$name exited during startup; its log:"
            tail -n 40 "$tmp/$name.log" >&2
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "$name did not answer $url within ${startup_timeout_secs}s; its log:"
            tail -n 40 "$tmp/$name.log" >&2
            exit 1
        fi
        sleep 0.2
    done
}

# A server already listening on our port would be benchmarked in place of ours.
port_free() {
    if curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/"; then
        log "port $1 is already in use; stop whatever listens there"
        exit 1
    fi
}

start_pouchdb() {
    if [[ ! -d $pouchdb_dir/node_modules ]]; then
        log "installing pouchdb-server (npm ci)"
        # --ignore-scripts: leveldown ships prebuilt binaries in its package; the only other install
        # script is the optional sqlite3, which would try to download a binary.
        (cd "$pouchdb_dir" && npm ci --ignore-scripts --no-audit --no-fund >&2)
    fi
    port_free "$pouchdb_port"
    mkdir -p "$tmp/pouchdb/data"
    # pouchdb-server writes log.txt into its working directory, so run it inside the temp dir.
    (
        cd "$tmp/pouchdb"
        exec node "$pouchdb_dir/node_modules/pouchdb-server/bin/pouchdb-server" \
            --host 127.0.0.1 --port "$pouchdb_port" --dir "$tmp/pouchdb/data" \
            --config "$tmp/pouchdb/config.json" --no-stdout-logs --no-color
    ) >"$tmp/pouchdb.log" 2>&1 &
    server_pids[pouchdb]=$!
    # pouchdb-server 4.2 has no /_up (it reads it as a database name); / answers once it is up.
    wait_up pouchdb "http://127.0.0.1:$pouchdb_port/"
}

start_settee() {
    if [[ ! -x $settee_bin ]]; then
        log "no settee binary at $settee_bin (build it, or set SETTEE_BIN)"
        exit 1
    fi
    port_free "$settee_port"
    mkdir -p "$tmp/settee"
    "$settee_bin" serve --data-dir "$tmp/settee" --http-addr "127.0.0.1:$settee_port" \
        --kv-addr 127.0.0.1:0 --mgmt-addr 127.0.0.1:0 --admin admin:password >"$tmp/settee.log" 2>&1 &
    server_pids[settee]=$!
    wait_up settee "http://127.0.0.1:$settee_port/_up"
}

# bench NAME URL [FLAGS...]: runs the load generator, its JSON lines go to $tmp/NAME.jsonl.
bench() {
    local name=$1 url=$2
    shift 2
    local -a cmd
    read -r -a cmd <<<"$bench_cmd"
    log "benchmarking $name: ${connections} connections, ${duration}s per phase, ${docs} docs of ${doc_size_bytes} bytes"
    "${cmd[@]}" --url "$url" "$@" --db bench --connections "$connections" \
        --duration-secs "$duration" --docs "$docs" --doc-size-bytes "$doc_size_bytes" \
        --mode both --json >"$tmp/$name.jsonl"
}

for server in $servers; do
    case $server in
    pouchdb)
        start_pouchdb
        bench pouchdb "http://127.0.0.1:$pouchdb_port"
        stop_server pouchdb
        ;;
    settee)
        start_settee
        bench settee "http://127.0.0.1:$settee_port" --user admin --password password
        stop_server settee
        ;;
    *)
        log "unknown server in SERVERS: $server (expected settee and/or pouchdb)"
        exit 1
        ;;
    esac
done

# One table of every phase of every server, then settee/pouchdb ratios when both ran.
node - "$tmp" $servers <<'EOF'
const fs = require("fs");
const [tmp, ...servers] = process.argv.slice(2);
const results = {};
for (const server of servers) {
  results[server] = {};
  for (const line of fs.readFileSync(`${tmp}/${server}.jsonl`, "utf8").split("\n")) {
    if (line.trim()) {
      const phase = JSON.parse(line);
      results[server][phase.name] = phase;
    }
  }
}
const row = (cells) => cells.map((c, i) => String(c)[i < 2 ? "padEnd" : "padStart"](i < 2 ? 8 : 11)).join(" ");
console.log(row(["server", "phase", "ops/s", "p50 us", "p99 us", "p999 us", "errors"]));
for (const server of servers) {
  for (const phase of Object.values(results[server])) {
    console.log(row([server, phase.name, phase.ops_per_sec.toFixed(0), phase.p50_us,
      phase.p99_us, phase.p999_us, phase.errors]));
  }
}
if (results.settee && results.pouchdb) {
  console.log("");
  for (const name of ["get", "put"]) {
    const settee = results.settee[name], pouchdb = results.pouchdb[name];
    if (settee && pouchdb && pouchdb.ops_per_sec > 0) {
      console.log(`${name} ops/s settee/pouchdb: ${(settee.ops_per_sec / pouchdb.ops_per_sec).toFixed(2)}x`);
    }
  }
}
EOF
