#!/usr/bin/env bash
# Side-by-side KV GET throughput of settee's Couchbase KV door and a plain memcached, measured in
# one run with the same load generator (`settee bench kv`, crates/bench/src/kv) and the same load:
# both are loaded with the same keys and values, then each connection count runs against
# memcached and then against settee, and the table ends with the settee/memcached ratio.
#
#   scripts/bench-kv-vs-memcached.sh
#   CONNECTIONS="1 16 64 256" DURATION=30 PIPELINE=32 scripts/bench-kv-vs-memcached.sh
#
# Environment (all optional):
#   SETTEE_BIN        settee binary (default $CARGO_TARGET_DIR/release/settee, built here)
#   BENCH_CMD         load generator command line (default "$SETTEE_BIN bench kv")
#   SKIP_BUILD        1: use SETTEE_BIN as it is
#   SERVERS           which servers to measure, in order (default "memcached settee")
#   CONNECTIONS       connection counts to run, one measurement each (default "1 16 64")
#   ROUNDS            times to repeat the whole series; ratios use the medians (default 1)
#   DURATION          measured seconds per measurement (default 10)
#   WARMUP            unmeasured seconds before each measurement (default 2)
#   PIPELINE          requests in flight per connection (default 16)
#   GET_RATIO         fraction of GETs (default 1.0: the issue's 100% GET load)
#   KEYS              distinct keys (default 65536, seed 002's document count)
#   VALUE_SIZE        bytes per value (default 200)
#   CLIENT_THREADS    load-generator threads (default 1)
#   MEMCACHED_THREADS memcached worker threads, its -t (default 4, memcached's own default)
#   SETTEE_FLAGS      extra flags for the settee runs only, e.g. "--unordered"
#
# Why these defaults: 16 requests in flight per connection is what a pipelining SDK (gocbcore in
# seed 002 kept 512 in flight over 1-8 connections) does, yet shallow enough that latency means
# something; without pipelining both servers would spend their time in syscalls and the number
# would measure the kernel. 10 s is over a million operations per measurement at these rates.
#
# Client and server share the machine: the script also prints each server's CPU time per
# operation (from /proc/PID/stat), and the load generator prints its own.
set -euo pipefail
settee_bin_override=${SETTEE_BIN:-}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SETTEE_BIN=${settee_bin_override:-$SETTEE_BIN}

bench_cmd=${BENCH_CMD:-"$SETTEE_BIN bench kv"}
servers=${SERVERS:-memcached settee}
connections_list=${CONNECTIONS:-1 16 64}
rounds=${ROUNDS:-1}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
pipeline=${PIPELINE:-16}
get_ratio=${GET_RATIO:-1.0}
keys=${KEYS:-65536}
value_size=${VALUE_SIZE:-200}
client_threads=${CLIENT_THREADS:-1}
memcached_threads=${MEMCACHED_THREADS:-4}
read -r -a settee_flags <<<"${SETTEE_FLAGS:-}"
# How long a server may take to accept its first connection.
startup_timeout_secs=60
clock_ticks_per_sec=$(getconf CLK_TCK)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-bench-kv.XXXXXX")
declare -A server_pids=() kv_ports=()

log() { echo "bench-kv-vs-memcached: $*" >&2; }

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

# listening PORT: true when something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: a loopback port nothing listens on (a random start, then upwards).
free_port() {
    local port=$((20000 + RANDOM % 20000))
    while listening "$port"; do
        port=$((port + 1))
    done
    echo "$port"
}

# wait_listening NAME PORT: polls until the server accepts connections, dies, or times out.
wait_listening() {
    local name=$1 port=$2 deadline=$((SECONDS + startup_timeout_secs))
    until listening "$port"; do
        if ! kill -0 "${server_pids[$name]}" 2>/dev/null; then
            log "$name exited during startup; its log:"
            tail -n 40 "$tmp/$name.log" >&2
            exit 1
        fi
        if ((SECONDS >= deadline)); then
            log "$name did not listen on port $port within ${startup_timeout_secs}s; its log:"
            tail -n 40 "$tmp/$name.log" >&2
            exit 1
        fi
        sleep 0.2
    done
}

install_memcached() {
    command -v memcached >/dev/null 2>&1 && return 0
    log "installing the Debian package memcached"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq memcached >/dev/null
}

start_memcached() {
    local port
    port=$(free_port)
    local -a run_as=()
    # memcached refuses to run as root unless told which user to be.
    [[ $(id -u) != 0 ]] || run_as=(-u root)
    memcached -l 127.0.0.1 -p "$port" -U 0 -m 1024 -t "$memcached_threads" "${run_as[@]}" \
        >"$tmp/memcached.log" 2>&1 &
    server_pids[memcached]=$!
    kv_ports[memcached]=$port
    wait_listening memcached "$port"
    log "memcached $(memcached -V | cut -d' ' -f2) on port $port, $memcached_threads threads"
}

start_settee() {
    local http_port kv_port mgmt_port
    http_port=$(free_port)
    kv_port=$(free_port)
    ((kv_port != http_port)) || kv_port=$((kv_port + 1))
    mgmt_port=$(free_port)
    while ((mgmt_port == http_port || mgmt_port == kv_port)); do mgmt_port=$((mgmt_port + 1)); done
    mkdir -p "$tmp/settee"
    "$SETTEE_BIN" serve --data-dir "$tmp/settee" --http-addr "127.0.0.1:$http_port" \
        --kv-addr "127.0.0.1:$kv_port" --mgmt-addr "127.0.0.1:$mgmt_port" \
        --admin admin:secret >"$tmp/settee.log" 2>&1 &
    server_pids[settee]=$!
    kv_ports[settee]=$kv_port
    wait_listening settee "$http_port"
    wait_listening settee "$kv_port"
    curl -fsS -u admin:secret -X PUT "http://127.0.0.1:$http_port/default" >/dev/null
    log "settee on KV port $kv_port (HTTP $http_port), bucket default"
}

# bench_kv NAME FLAGS...: the load generator against server NAME, with its own flags.
bench_kv() {
    local name=$1
    shift
    local -a cmd auth=()
    read -r -a cmd <<<"$bench_cmd"
    if [[ $name == settee ]]; then
        auth=(--user admin --password secret --bucket default "${settee_flags[@]}")
    fi
    "${cmd[@]}" --addr "127.0.0.1:${kv_ports[$name]}" "${auth[@]}" --keys "$keys" \
        --value-size "$value_size" --pipeline "$pipeline" --threads "$client_threads" "$@"
}

# cpu_ticks PID: user + system CPU time of a process, in clock ticks.
cpu_ticks() {
    # Fields after the command name, which is in parentheses and may contain spaces.
    local stat
    stat=$(<"/proc/$1/stat")
    stat=${stat##*) }
    local -a fields
    read -r -a fields <<<"$stat"
    # utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    echo $((fields[11] + fields[12]))
}

# field NAME LINE: a number from one of the load generator's JSON lines.
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$2"; }

install_memcached
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    log "building settee (release)"
    build_release >&2
fi

for server in $servers; do
    case $server in
    memcached) start_memcached ;;
    settee) start_settee ;;
    *)
        log "unknown server in SERVERS: $server (expected memcached and/or settee)"
        exit 1
        ;;
    esac
    log "loading $server: $keys keys of $value_size bytes"
    bench_kv "$server" --connections 16 --duration 0 >&2
done

results=$tmp/results.tsv
for round in $(seq 1 "$rounds"); do
for connections in $connections_list; do
    for server in $servers; do
        log "round $round, $server: $connections connections x $pipeline in flight, ${duration}s (+${warmup}s warm-up)"
        before=$(cpu_ticks "${server_pids[$server]}")
        json=$(bench_kv "$server" --no-load --connections "$connections" --get-ratio "$get_ratio" \
            --duration "$duration" --warmup "$warmup" --json)
        after=$(cpu_ticks "${server_pids[$server]}")
        line=$(grep '"name":"get"' <<<"$json" || grep '"name":"set"' <<<"$json")
        ops=$(field ops "$line")
        # The server's CPU over warm-up + measurement, per measured operation (an estimate: the
        # warm-up's operations are not counted, so this overstates it by up to warmup/duration).
        server_us=$(awk -v ticks=$((after - before)) -v hz="$clock_ticks_per_sec" -v ops="$ops" \
            -v share="$(awk -v d="$duration" -v w="$warmup" 'BEGIN { print d / (d + w) }')" \
            'BEGIN { if (ops > 0) printf "%.2f", ticks / hz * share * 1e6 / ops; else print "-" }')
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$server" "$connections" \
            "$(field ops_per_sec "$line")" "$(field p50_us "$line")" "$(field p99_us "$line")" \
            "$(field p999_us "$line")" "$(field errors "$line")" \
            "$(field client_cpu_us_per_op "$line")" "$server_us" >>"$results"
    done
done
done

echo
echo "GET ratio $get_ratio, $keys keys, $value_size-byte values, $pipeline in flight per connection," \
    "${duration}s each; memcached -t $memcached_threads; $(nproc) CPUs shared by client and server"
awk -F'\t' '
    BEGIN {
        printf "%-5s %-10s %5s %12s %8s %8s %8s %7s %13s %13s\n", "round", "server", "conns",
            "ops/s", "p50 us", "p99 us", "p999 us", "errors", "client us/op", "server us/op"
    }
    {
        printf "%-5s %-10s %5s %12.0f %8s %8s %8s %7s %13.2f %13s\n", $1, $2, $3, $4, $5, $6, $7,
            $8, $9, $10
        rates[$2, $3, ++count[$2, $3]] = $4
        if (!($3 in seen)) { seen[$3] = 1; order[++n] = $3 }
    }
    # The median of the rates of (server, conns); 0 when that server did not run.
    function median(server, conns,    k, i, j, v, tmp) {
        k = count[server, conns]
        if (k == 0) return 0
        for (i = 1; i <= k; i++) v[i] = rates[server, conns, i]
        for (i = 2; i <= k; i++)
            for (j = i; j > 1 && v[j - 1] > v[j]; j--) { tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp }
        return k % 2 ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
    }
    END {
        print ""
        for (i = 1; i <= n; i++) {
            c = order[i]
            m = median("memcached", c)
            s = median("settee", c)
            if (m > 0 && s > 0) {
                printf "settee/memcached GET ops/s at %s connections: %.2fx (medians: %.0f / %.0f, %d round(s))\n",
                    c, s / m, s, m, count["settee", c]
            }
        }
    }' "$results"
