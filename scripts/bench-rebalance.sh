#!/usr/bin/env bash
# Issue 21's rebalance benchmark: file transfer against the rebuild path, on the same data in
# one run. For each mode: a 2-node loopback cluster (scripts/cluster, every node started with
# --rebalance-mode MODE) holds DOCS documents of ~200 bytes in a bucket with one replica, two
# JavaScript views and one Mango index, built; a third node joins and `settee cluster
# rebalance` moves its share to it. Measured per mode:
#   move_s     POST /controller/rebalance until rebalanceProgress says none
#   total_s    move_s plus the time until both views and the Mango index answer fresh
#              (update=true, as Couchbase's comparison counts the index rebuild)
#   cpu_s      CPU seconds of each node over total_s (/proc/PID/stat)
#   peak_rss   each node's peak RSS over the run (VmHWM, reset before the rebalance)
#   target_disk_bytes  the new node's data directory after
#   p99_before_ms / p99_during_ms  document GETs through node 1 by one client, 5 s before
#              and during the move
# and the ratio rebuild / files of total_s. Prints one JSON line per mode, then the ratio.
#
#   scripts/bench-rebalance.sh            # DOCS=1000000 VBUCKETS=64 THROTTLE_MBPS=200
#
# SETTEE_NO_BUILD=1 as scripts/cluster.
source "$(dirname "$0")/lib.sh"
export SETTEE_CLUSTER_DIR="${TMPDIR:-/tmp}/settee-bench-rebalance"
"$ROOT/scripts/cluster" down >/dev/null
trap '"$ROOT/scripts/cluster" down >/dev/null' EXIT
if [[ -z ${SETTEE_NO_BUILD:-} ]]; then
  install_system_packages
  build_release
fi
export SETTEE_NO_BUILD=1
results=()
for mode in files rebuild; do
  "$ROOT/scripts/cluster" down >/dev/null
  SETTEE_SERVE_ARGS="--rebalance-mode $mode --rebalance-throttle-mbps ${THROTTLE_MBPS:-200}" \
    "$ROOT/scripts/cluster" up 2 >/dev/null
  line=$(SETTEE_SERVE_ARGS="--rebalance-mode $mode --rebalance-throttle-mbps ${THROTTLE_MBPS:-200}" \
    python3 - "$mode" "${DOCS:-1000000}" "${VBUCKETS:-64}" "$SETTEE_CLUSTER_DIR" "$ROOT" \
    "$SETTEE_BIN" <<'EOF'
import base64, http.client, json, os, random, subprocess, sys, threading, time

mode, docs, vbuckets, state, root, binary = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
auth = "Basic " + base64.b64encode(b"admin:secret").decode()
TICK = os.sysconf("SC_CLK_TCK")

def node(k):
    with open(f"{state}/node{k}/node") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)

def call(addr, method, path, body=None, timeout=3600):
    # A scattered query waits for each node's index at most the cluster transport's timeout
    # (503 past it, the build going on): asked again until answered.
    while True:
        conn = http.client.HTTPConnection(addr, timeout=timeout)
        headers = {"Authorization": auth}
        payload = None if body is None else json.dumps(body)
        if payload is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = response.read()
        if response.status == 503 and b"timed out" in data:
            continue
        if response.status >= 300:
            raise SystemExit(f"{method} {path}: {response.status} {data[:300]!r}")
        return json.loads(data) if data else None

def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK

def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0

def reset_peak(pid):
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")

def disk(path):
    total = 0
    for base, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(base, name))
            except OSError:
                pass
    return total

n1, n2 = node(1), node(2)
call(n1["http"], "PUT", f"/bench?q={vbuckets}&n=2")
time.sleep(1)
rng = random.Random(21)
kinds = ["alpha", "beta", "gamma", "delta"]
for start in range(0, docs, 2000):
    batch = [{"_id": f"doc-{i:08d}", "k": rng.randrange(docs), "kind": kinds[i % 4],
              "n": i, "text": "x" * 120}
             for i in range(start, min(docs, start + 2000))]
    call((n1 if (start // 2000) % 2 == 0 else n2)["http"], "POST", "/bench/_bulk_docs", {"docs": batch})
call(n1["http"], "PUT", "/bench/_design/app", {"views": {
    "by_k": {"map": "function (doc) { emit(doc.k, null); }"},
    "by_kind": {"map": "function (doc) { emit([doc.kind, doc.n], 1); }", "reduce": "_count"},
}})
call(n1["http"], "POST", "/bench/_index", {"index": {"fields": ["kind", "n"]}, "name": "by-kind"})

def fresh():
    call(n1["http"], "GET", "/bench/_design/app/_view/by_k?limit=1")
    call(n1["http"], "GET", "/bench/_design/app/_view/by_kind?limit=1")
    call(n1["http"], "POST", "/bench/_find", {"selector": {"kind": "beta", "n": {"$gt": 0}},
         "use_index": "by-kind", "limit": 1})

fresh()
subprocess.run([f"{root}/scripts/cluster", "add"], check=True, stdout=subprocess.DEVNULL)
n3 = node(3)
pids = {"source1": int(n1["pid"]), "source2": int(n2["pid"]), "target": int(n3["pid"])}

latencies = []
stop = threading.Event()
def probe():
    conn = http.client.HTTPConnection(n1["http"], timeout=60)
    while not stop.is_set():
        path = f"/bench/doc-{rng.randrange(docs):08d}"
        t = time.monotonic()
        try:
            conn.request("GET", path, headers={"Authorization": auth})
            response = conn.getresponse()
            response.read()
        except Exception:
            conn = http.client.HTTPConnection(n1["http"], timeout=60)
            continue
        latencies.append((t, (time.monotonic() - t) * 1000, response.status))
prober = threading.Thread(target=probe, daemon=True)
prober.start()
time.sleep(5)

for pid in pids.values():
    reset_peak(pid)
cpu_before = {name: cpu(pid) for name, pid in pids.items()}
started = time.monotonic()
subprocess.run([binary, "cluster", "rebalance", "--mgmt", f"http://admin:secret@{n1['mgmt']}"],
               check=True, stdout=subprocess.DEVNULL)
moved = time.monotonic()
stop.set()
prober.join()
fresh()
done = time.monotonic()
cpu_after = {name: cpu(pid) for name, pid in pids.items()}

def p99(window):
    times = sorted(ms for t, ms, _ in latencies if window(t))
    return round(times[max(0, int(len(times) * 0.99) - 1)], 2) if times else None

failed = sum(1 for t, _, status in latencies if status >= 500)
print(json.dumps({
    "mode": mode, "docs": docs, "vbuckets": vbuckets,
    "move_s": round(moved - started, 2), "total_s": round(done - started, 2),
    "cpu_s": {name: round(cpu_after[name] - cpu_before[name], 1) for name in pids},
    "peak_rss_mb": {name: round(peak_rss(pid) / 2**20) for name, pid in pids.items()},
    "target_disk_bytes": disk(f"{state}/node3/data"),
    "p99_before_ms": p99(lambda t: t < started), "p99_during_ms": p99(lambda t: t >= started),
    "gets": len(latencies), "gets_failed": failed,
}), flush=True)
EOF
)
  echo "$line"
  results+=("$line")
done
python3 - "${results[@]}" <<'EOF'
import json, sys
files, rebuild = (json.loads(line) for line in sys.argv[1:3])
print(json.dumps({"rebuild_over_files_total": round(rebuild["total_s"] / files["total_s"], 2),
                  "rebuild_over_files_move": round(rebuild["move_s"] / files["move_s"], 2)}))
EOF
