#!/usr/bin/env bash
# A real Prometheus scrapes a real settee: both doors' endpoints (CouchDB's
# /_node/_local/_prometheus on the HTTP port, Couchbase-style /metrics on the management port,
# basic auth as the admin), then PromQL through Prometheus's HTTP API must show the counters
# moved by exactly the writes made. Installs Debian's `prometheus` if it is missing.
source "$(dirname "$0")/../../scripts/lib.sh"

if ! command -v prometheus >/dev/null 2>&1; then
  echo "installing Debian packages: prometheus"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi

DOCS=20
tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-metrics.XXXXXX")
pid=
prometheus_pid=
cleanup() {
  [[ -z $prometheus_pid ]] || { kill "$prometheus_pid" 2>/dev/null || true; wait "$prometheus_pid" 2>/dev/null || true; }
  stop_settee
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_settee "$SETTEE_BIN" "$tmp/data" "$tmp/settee.log"
prometheus_port=$(free_port)
while ((prometheus_port == http_port || prometheus_port == kv_port || prometheus_port == mgmt_port)); do
  prometheus_port=$((prometheus_port + 1))
done
cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: couchdb
    metrics_path: /_node/_local/_prometheus
    basic_auth: {username: admin, password: secret}
    static_configs: [{targets: ["127.0.0.1:$http_port"]}]
  - job_name: kv
    metrics_path: /metrics
    basic_auth: {username: admin, password: secret}
    static_configs: [{targets: ["127.0.0.1:$mgmt_port"]}]
YAML
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$tmp/prometheus.log" 2>&1 &
prometheus_pid=$!

# query PROMQL: the value of the first series of an instant query, or nothing.
query() {
  curl -sf "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode "query=$1" \
    | python3 -c 'import json, sys
result = json.load(sys.stdin)["data"]["result"]
print(result[0]["value"][1] if result else "")' 2>/dev/null || true
}

# wait_for PROMQL EXPECTED: polls until the query answers EXPECTED, for at most a minute.
wait_for() {
  local deadline=$((SECONDS + 60)) got=
  while ((SECONDS < deadline)); do
    kill -0 "$prometheus_pid" 2>/dev/null || { tail -n 20 "$tmp/prometheus.log" >&2; return 1; }
    got=$(query "$1")
    [[ $got == "$2" ]] && { echo "ok: $1 = $got"; return 0; }
    sleep 0.5
  done
  echo "FAILED: $1 = '${got}', expected $2" >&2
  curl -s "http://127.0.0.1:$prometheus_port/api/v1/targets" >&2 || true
  return 1
}

# Both targets scraped successfully before anything is written, so the first sample of the
# counters is the value before the writes.
wait_for 'up{job="couchdb"}' 1
wait_for 'up{job="kv"}' 1
wait_for 'count(couchdb_database_writes_total)' 1

curl -sf -u admin:secret -X PUT "http://127.0.0.1:$http_port/promdb" >/dev/null
for i in $(seq 1 "$DOCS"); do
  curl -sf -u admin:secret -X PUT "http://127.0.0.1:$http_port/promdb/doc$i" -d '{"n": '"$i"'}' >/dev/null
done

wait_for 'max_over_time(couchdb_database_writes_total[10m]) - min_over_time(couchdb_database_writes_total[10m])' "$DOCS"
wait_for 'max_over_time(couchdb_httpd_status_codes{code="201"}[10m]) - min_over_time(couchdb_httpd_status_codes{code="201"}[10m])' "$((DOCS + 1))"
wait_for 'kv_curr_items{bucket="promdb"}' "$DOCS"
wait_for 'count(settee_http_request_duration_seconds_bucket{method="PUT"}) > 0' 17
# One per door: both expose the process's figures.
wait_for 'count(process_resident_memory_bytes > 0)' 2
echo "metrics: Prometheus scraped both doors and saw the $DOCS writes"
