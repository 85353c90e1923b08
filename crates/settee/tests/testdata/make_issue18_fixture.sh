#!/usr/bin/env bash
# Writes issue18-30733d8.tar.gz: a data directory made by settee 30733d8 (the release before
# issue 18's fixes) that holds what that version let clients store and later readers choke on:
#   db/good00..good19   ordinary documents {"n": i, "type": "good"}
#   db/_design/app      a JavaScript view (map emit(doc.n, null), reduce _count), built
#   db/_design/mango    a Mango JSON index on "n" (built by one _find)
#   db/x                PUT ?new_edits=false {"_revisions":{"start":4294967296,"ids":["aa"]}}:
#                       30733d8 stored it with an EMPTY revision tree, and every _all_docs,
#                       _changes, view, _find and replication of the database failed after it
#   db/deep             a 100,000-deep JSON array written over the KV door (HTTP refuses > 100)
#   db/big              a 9,000,000-byte JSON document written over the KV door (HTTP: 413)
# crates/settee/tests/issue18_old_data.rs opens a copy with the current binary.
#
# Usage: make_issue18_fixture.sh [OLD_SETTEE_BINARY]   (default /work/base/settee-30733d8)
# Needs curl, python3, tar, gzip. Run it again only to regenerate the fixture.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OLD_BIN="${1:-/work/base/settee-30733d8}"
OUT="$HERE/issue18-30733d8.tar.gz"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/settee-issue18-fixture.XXXXXX")"
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

http() { # METHOD PATH [BODY]: prints the response, fails on a status >= 400
  local method="$1" path="$2"; shift 2
  curl -sS --fail-with-body -u admin:secret -X "$method" -H 'Content-Type: application/json' \
    "$URL$path" "$@"
  echo
}

http PUT '/db?q=4'
docs="$(python3 -c 'import json; print(json.dumps({"docs": [{"_id": "good%02d" % i, "n": i, "type": "good"} for i in range(20)]}))')"
http POST /db/_bulk_docs -d "$docs"
http PUT /db/_design/app -d '{"views":{"by_n":{"map":"function (doc) { if (doc.type) emit(doc.n, null); }","reduce":"_count"}}}'
http POST /db/_index -d '{"index":{"fields":["n"]},"ddoc":"mango","name":"by-n"}'
# Build both indexes now: after the poisoned write 30733d8 can no longer build them.
http GET '/db/_design/app/_view/by_n?reduce=false&limit=1'
http POST /db/_find -d '{"selector":{"n":{"$gte":0}},"use_index":"mango","limit":1}'

# The write that hid the whole database on 30733d8.
http PUT '/db/x?new_edits=false' -d '{"_revisions":{"start":4294967296,"ids":["aa"]}}'

# Over the KV door, what HTTP refuses: raw memcached binary frames, SASL PLAIN.
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
store = lambda key, value: call(sock, frame(0x01, key, struct.pack(">II", 0, 0), value))
store(b"deep", b"[" * 100_000 + b"]" * 100_000)
pad = 9_000_000 - len(b'{"pad":""}')
store(b"big", b'{"pad":"' + b"a" * pad + b'"}')
sock.close()
PY

kill -TERM "$PID"; wait "$PID" || true; PID=""
du -sh "$WORK/data"
tar -C "$WORK" -czf "$OUT" data
ls -l "$OUT"
