#!/usr/bin/env bash
# A view's build time and query latency on 1, 2 and 3 nodes (issue 20's view benchmark): the
# same documents and design document on a loopback cluster of each size, every query asked of
# every node in turn (so two thirds of them reach a node that does not hold the design
# document), one keep-alive connection per node.
#
#   scripts/bench-cluster-views.sh [NODE_COUNTS]        # default "1 2 3"
#
# DOCS (default 100000), QUERIES per kind (default 300), VBUCKETS (default 64); the bucket has
# no replica (n=1) so each node indexes only its own third. SETTEE_NO_BUILD=1 as
# scripts/cluster. Prints one JSON line per cluster size: build seconds, and per query kind
# p50/p99 milliseconds.
source "$(dirname "$0")/lib.sh"
COUNTS=${1:-"1 2 3"}
export SETTEE_CLUSTER_DIR="${TMPDIR:-/tmp}/settee-bench-cluster-views"
"$ROOT/scripts/cluster" down >/dev/null
trap '"$ROOT/scripts/cluster" down >/dev/null' EXIT
for count in $COUNTS; do
  "$ROOT/scripts/cluster" down >/dev/null
  "$ROOT/scripts/cluster" up "$count" >/dev/null
  urls=()
  for ((k = 1; k <= count; k++)); do
    urls+=("$(sed -n 's/^http=//p' "$SETTEE_CLUSTER_DIR/node$k/node")")
  done
  python3 - "$count" "${DOCS:-100000}" "${QUERIES:-300}" "${VBUCKETS:-64}" "${urls[@]}" <<'EOF'
import base64, http.client, json, random, sys, time

count, docs, queries, vbuckets = (int(x) for x in sys.argv[1:5])
urls = sys.argv[5:]
auth = "Basic " + base64.b64encode(b"admin:secret").decode()
conns = [http.client.HTTPConnection(url, timeout=600) for url in urls]

def call(conn, method, path, body=None):
    headers = {"Authorization": auth}
    if body is not None:
        body = json.dumps(body)
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise SystemExit(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data)

call(conns[0], "PUT", f"/bench?q={vbuckets}&n=1")
time.sleep(1)
rng = random.Random(7)
for start in range(0, docs, 1000):
    batch = [{"_id": f"doc-{i:08d}", "k": rng.randrange(docs // 10), "g": i % 100}
             for i in range(start, min(docs, start + 1000))]
    call(conns[(start // 1000) % count], "POST", "/bench/_bulk_docs", {"docs": batch})
call(conns[0], "PUT", "/bench/_design/app", {"views": {
    "by_k": {"map": "function (doc) { emit(doc.k, null); }"},
    "count": {"map": "function (doc) { emit([doc.g, doc.k], 1); }", "reduce": "_count"},
}})
started = time.monotonic()
call(conns[0], "GET", "/bench/_design/app/_view/by_k?limit=1")
call(conns[0], "GET", "/bench/_design/app/_view/count?limit=1")
build = time.monotonic() - started

kinds = {
    "key": lambda: f"/bench/_design/app/_view/by_k?key={rng.randrange(docs // 10)}",
    "range": lambda: f"/bench/_design/app/_view/by_k?startkey={rng.randrange(docs // 10)}&limit=20",
    "reduce": lambda: "/bench/_design/app/_view/count",
    "group": lambda: f"/bench/_design/app/_view/count?group_level=1&startkey=[{rng.randrange(90)}]&limit=10",
}
result = {"nodes": count, "docs": docs, "vbuckets": vbuckets, "build_s": round(build, 2)}
for kind, path in kinds.items():
    times = []
    for q in range(queries):
        conn = conns[q % count]
        t = time.monotonic()
        call(conn, "GET", path())
        times.append((time.monotonic() - t) * 1000)
    times.sort()
    result[kind] = {"p50_ms": round(times[len(times) // 2], 2),
                    "p99_ms": round(times[int(len(times) * 0.99) - 1], 2)}
print(json.dumps(result), flush=True)
EOF
done
