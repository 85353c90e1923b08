#!/usr/bin/env bash
# Writes crates/engine/testdata/datadir-30733d8/: the storage directory (`db/`, RocksDB) of a
# node run by settee 30733d8 (0.1.0, format version 1, before scopes and collections), and
# what that node answered about it (`expected/*.json`). It holds, in database `db` (4 vbuckets):
#   plain00..plain09   ordinary documents, plain03 edited twice
#   withatt            a document with two attachments (text and binary), then edited with stubs
#   conflicted         two leaves: a local edit and a branch written with new_edits=false
#   gone               created, then deleted
#   purged             created, then removed with _purge (purge_seq 1)
#   expiring           written over the KV door with an absolute expiry on 2100-01-01
#   _local/ckpt, _local/other   _local documents (other edited once)
#   _design/app        a JavaScript view (emit(doc.n, null), reduce _count), built
#   _design/mango      a Mango JSON index on "n", built by one _find
# crates/engine/tests/old_data_dir_30733d8.rs opens a copy with today's engine.
#
# Usage: scripts/make-testdata-30733d8.sh [OLD_SETTEE_BINARY]   (default /work/base/settee-30733d8)
# Needs curl, python3. Run it again only to regenerate the test data.
set -euo pipefail
[ -n "${TRACE:-}" ] && set -x
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OLD_BIN="${1:-/work/base/settee-30733d8}"
OUT="$ROOT/crates/engine/testdata/datadir-30733d8"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/settee-datadir-30733d8.XXXXXX")"
PID=""
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill -TERM "$PID"; wait "$PID" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP_PORT="$(free_port)"; KV_PORT="$(free_port)"; MGMT_PORT="$(free_port)"
"$OLD_BIN" serve --data-dir "$WORK/data" --admin admin:secret --kv-allow-plain \
  --http-addr "127.0.0.1:$HTTP_PORT" --kv-addr "127.0.0.1:$KV_PORT" \
  --mgmt-addr "127.0.0.1:$MGMT_PORT" >"$WORK/log" 2>&1 &
PID=$!
URL="http://127.0.0.1:$HTTP_PORT"
for _ in $(seq 100); do curl -sf "$URL/_up" >/dev/null && break; sleep 0.1; done

http() { # METHOD PATH [curl args]: prints the response body, fails on a status >= 400
  local method="$1" path="$2"; shift 2
  curl -sS --fail-with-body -u admin:secret -X "$method" -H 'Content-Type: application/json' \
    "$URL$path" "$@"
}
rev_of() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("rev") or d["_rev"])'; }

http PUT '/db?q=4' >/dev/null
docs="$(python3 -c 'import json; print(json.dumps({"docs": [{"_id": "plain%02d" % i, "n": i, "type": "plain"} for i in range(10)]}))')"
http POST /db/_bulk_docs -d "$docs" >/dev/null
rev="$(http GET /db/plain03 | rev_of)"
rev="$(http PUT "/db/plain03?rev=$rev" -d '{"n":3,"type":"plain","edit":1}' | rev_of)"
http PUT "/db/plain03?rev=$rev" -d '{"n":3,"type":"plain","edit":2}' >/dev/null

rev="$(http PUT /db/withatt -d '{"n":100,"_attachments":{"note.txt":{"content_type":"text/plain","data":"aGVsbG8gZnJvbSAwLjEuMA=="},"blob.bin":{"content_type":"application/octet-stream","data":"AAECA/8="}}}' | rev_of)"
http PUT "/db/withatt?rev=$rev" -d '{"n":101,"_attachments":{"note.txt":{"stub":true},"blob.bin":{"stub":true}}}' >/dev/null

rev="$(http PUT /db/conflicted -d '{"n":200,"side":"local"}' | rev_of)"
http PUT "/db/conflicted?rev=$rev" -d '{"n":200,"side":"local","edit":1}' >/dev/null
http POST /db/_bulk_docs -d '{"new_edits":false,"docs":[{"_id":"conflicted","_rev":"2-0000000000000000000000000000beef","_revisions":{"start":2,"ids":["0000000000000000000000000000beef","0000000000000000000000000000cafe"]},"n":200,"side":"remote"}]}' >/dev/null

rev="$(http PUT /db/gone -d '{"n":300}' | rev_of)"
http DELETE "/db/gone?rev=$rev" >/dev/null

rev="$(http PUT /db/purged -d '{"n":400}' | rev_of)"
http POST /db/_purge -d "{\"purged\":[\"$rev\"]}" >/dev/null

http PUT /db/_local/ckpt -d '{"seq":"42","history":[1,2,3]}' >/dev/null
rev="$(http PUT /db/_local/other -d '{"v":1}' | rev_of)"
http PUT /db/_local/other -d "{\"v\":2,\"_rev\":\"$rev\"}" >/dev/null

http PUT /db/_design/app -d '{"views":{"by_n":{"map":"function (doc) { if (typeof doc.n === \"number\") emit(doc.n, null); }","reduce":"_count"}}}' >/dev/null
http POST /db/_index -d '{"index":{"fields":["n"]},"ddoc":"mango","name":"by-n"}' >/dev/null

# Over the KV door: a JSON document with an absolute expiry (2100-01-01), SASL PLAIN.
python3 - "$KV_PORT" <<'PY'
import socket, struct, sys

def frame(opcode, key=b"", extras=b"", value=b"", datatype=0):
    header = struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), datatype, 0,
                         len(extras) + len(key) + len(value), 0, 0)
    return header + extras + key + value

def call(sock, data):
    sock.sendall(data)
    head = b""
    while len(head) < 24:
        head += sock.recv(24 - len(head))
    status, body_len = struct.unpack(">H", head[6:8])[0], struct.unpack(">I", head[8:12])[0]
    body = b""
    while len(body) < body_len:
        body += sock.recv(body_len - len(body))
    if status != 0:
        sys.exit(f"KV status {status:#x}: {body!r}")

sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
call(sock, frame(0x21, b"PLAIN", value=b"\0admin\0secret"))  # SASL_AUTH
call(sock, frame(0x89, b"db"))                                # SELECT_BUCKET
flags_json = 0x02000000
call(sock, frame(0x01, b"expiring", struct.pack(">II", flags_json, 4102444800), b'{"n":500}', 1))
sock.close()
PY

# What 30733d8 answers, recorded for the test (the views are built by these queries).
mkdir -p "$WORK/expected"
http GET '/db/_all_docs' >"$WORK/expected/all_docs.json"
http GET '/db/_changes?style=all_docs' >"$WORK/expected/changes.json"
http GET '/db' >"$WORK/expected/db_info.json"
http GET '/db/_design/app/_view/by_n?reduce=false' >"$WORK/expected/view_by_n.json"
http GET '/db/_design/app/_view/by_n' >"$WORK/expected/view_by_n_reduced.json"
http POST /db/_find -d '{"selector":{"n":{"$gte":0}},"use_index":"mango","fields":["_id","n"]}' \
  >"$WORK/expected/find_n.json"
python3 - "$URL" "$WORK/expected" <<'PY'
import base64, json, sys, urllib.request

url, out = sys.argv[1], sys.argv[2]
auth = "Basic " + base64.b64encode(b"admin:secret").decode()

def get(path):
    request = urllib.request.Request(url + path, headers={"Authorization": auth,
                                                          "Accept": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)

all_docs = get("/db/_all_docs")
documents = {}
for row in all_docs["rows"]:
    documents[row["id"]] = get("/db/%s?revs=true&conflicts=true&attachments=true" % row["id"])
# The deleted document, at its tombstone revision.
changes = get("/db/_changes?style=all_docs")
for row in changes["results"]:
    if row.get("deleted"):
        documents[row["id"]] = get("/db/%s?rev=%s&revs=true" % (row["id"], row["changes"][0]["rev"]))
documents["_local/ckpt"] = get("/db/_local/ckpt")
documents["_local/other"] = get("/db/_local/other")
json.dump(documents, open(out + "/documents.json", "w"), indent=1, sort_keys=True)
PY

kill -TERM "$PID"; wait "$PID" || true; PID=""
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$WORK/data/db" "$OUT/db"
# RocksDB's info logs say nothing the test needs.
rm -f "$OUT"/db/LOG "$OUT"/db/LOG.old.*
cp -r "$WORK/expected" "$OUT/expected"
for file in "$OUT"/expected/*.json; do
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); json.dump(d, open(sys.argv[1],"w"), indent=1, sort_keys=True)' "$file"
done
du -sh "$OUT"
ls -l "$OUT/db"
