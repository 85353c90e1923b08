#!/usr/bin/env bash
# TLS against a real settee: a test CA made with openssl; curl and openssl s_client over HTTPS
# and KV-over-TLS; clients that do not trust the CA refused; SIGHUP serving a new certificate
# (and a failed reload keeping the old one); a bad certificate or key stopping the start with
# a clear error; nano and PouchDB over HTTPS (tests/compat's modules, NODE_EXTRA_CA_CERTS).
# The Couchbase SDKs' couchbases:// tests are in tests/compat-kv (their harnesses make the
# same CA with make-certs.sh).
source "$(dirname "$0")/../../scripts/lib.sh"
HERE="$ROOT/tests/tls"

if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi
if [ ! -d "$ROOT/tests/compat/node_modules/nano" ]; then
  (cd "$ROOT/tests/compat" && npm ci --no-audit --no-fund >/dev/null)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-tls.XXXXXX")
pid=
trap 'stop_settee; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
certs="$tmp/certs"
"$HERE/make-certs.sh" "$certs"
cp "$certs/node.crt" "$certs/served.crt"
cp "$certs/node.key" "$certs/served.key"

failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }

# A bad certificate or key stops the start, naming the file.
bad_start() {
  local expected=$1
  shift
  local output status=0
  output=$("$SETTEE_BIN" serve --data-dir "$tmp/bad" --http-addr 127.0.0.1:0 --kv-addr 127.0.0.1:0 \
    --mgmt-addr 127.0.0.1:0 --admin admin:secret --https-addr 127.0.0.1:0 \
    --kv-tls-addr 127.0.0.1:0 --mgmt-tls-addr 127.0.0.1:0 "$@" 2>&1 </dev/null) || status=$?
  if [[ $status -ne 0 && $output == *"$expected"* ]]; then
    pass "start refused: ${expected}"
  else
    fail "start with $* (exit $status): expected '$expected' in: $(head -c 300 <<<"$output")"
  fi
}
echo "garbage" >"$tmp/garbage.pem"
bad_start "no PEM certificate" --tls-cert "$tmp/garbage.pem" --tls-key "$certs/node.key"
bad_start "cannot read the TLS key file $tmp/missing.key" --tls-cert "$certs/node.crt" --tls-key "$tmp/missing.key"
bad_start "no PEM private key" --tls-cert "$certs/node.crt" --tls-key "$certs/node.crt"
bad_start "cannot be used together" --tls-cert "$certs/node.crt" --tls-key "$certs/next.key"
bad_start "must be given together" --tls-cert "$certs/node.crt"

https_port=$(free_port)
kv_tls_port=$((https_port + 1))
while listening "$kv_tls_port"; do kv_tls_port=$((kv_tls_port + 1)); done
mgmt_tls_port=$((kv_tls_port + 1))
while listening "$mgmt_tls_port"; do mgmt_tls_port=$((mgmt_tls_port + 1)); done
start_settee "$SETTEE_BIN" "$tmp/data" "$tmp/settee.log" \
  --tls-cert "$certs/served.crt" --tls-key "$certs/served.key" \
  --https-addr "127.0.0.1:$https_port" --kv-tls-addr "127.0.0.1:$kv_tls_port" \
  --mgmt-tls-addr "127.0.0.1:$mgmt_tls_port"
until listening "$https_port" && listening "$kv_tls_port" && listening "$mgmt_tls_port"; do sleep 0.1; done
https="https://127.0.0.1:$https_port"

# curl over HTTPS, trusting the test CA; the same node behind both ports.
if curl -sf --cacert "$certs/ca.crt" -u admin:secret "$https/" | grep -q Welcome; then
  pass "curl over HTTPS"
else
  fail "curl over HTTPS"
fi
curl -sf --cacert "$certs/ca.crt" -u admin:secret -X PUT "$https/tlsdb" >/dev/null
curl -sf --cacert "$certs/ca.crt" -u admin:secret -X PUT "$https/tlsdb/doc" -d '{"secure":true}' >/dev/null
if curl -sf -u admin:secret "http://127.0.0.1:$http_port/tlsdb/doc" | grep -q '"secure":true'; then
  pass "a document written over HTTPS is read over HTTP"
else
  fail "a document written over HTTPS is read over HTTP"
fi

if [[ $(curl -sf --cacert "$certs/ca.crt" -u admin:secret "$https/_node/_local/_config/ssl/enable") == '"true"' ]]; then
  pass "_config shows [ssl] enable = true"
else
  fail "_config [ssl] enable"
fi

# The management port over HTTPS (mgmtSSL), its metrics included.
if curl -sf --cacert "$certs/ca.crt" -u admin:secret "https://127.0.0.1:$mgmt_tls_port/metrics" | grep -q '^kv_curr_items{bucket="tlsdb"} 1$'; then
  pass "the management port's /metrics over HTTPS"
else
  fail "the management port's /metrics over HTTPS"
fi

# Clients that do not trust the certificate are refused, with the reason.
for trust in "" "--cacert $certs/other-ca.crt"; do
  status=0
  # shellcheck disable=SC2086
  error=$(curl -sS $trust -u admin:secret "$https/" 2>&1 >/dev/null) || status=$?
  if [[ $status -eq 60 && $error == *"certificate"* ]]; then
    pass "curl ${trust:-with the system CAs} refused: $(head -1 <<<"$error")"
  else
    fail "curl ${trust:-with the system CAs}: exit $status, $error"
  fi
done

# serial PORT: the serial number of the certificate the port serves.
serial() {
  openssl s_client -connect "127.0.0.1:$1" -CAfile "$certs/ca.crt" -verify_return_error \
    </dev/null 2>/dev/null | openssl x509 -noout -serial 2>/dev/null
}
expect_serial() {
  local port=$1 name=$2 wanted
  wanted=$(openssl x509 -noout -serial -in "$certs/$name.crt")
  if [[ $(serial "$port") == "$wanted" ]]; then pass "port $port serves $name.crt"; else fail "port $port does not serve $name.crt"; fi
}
expect_serial "$https_port" node
expect_serial "$kv_tls_port" node
expect_serial "$mgmt_tls_port" node
if openssl s_client -connect "127.0.0.1:$kv_tls_port" -CAfile "$certs/other-ca.crt" \
    -verify_return_error </dev/null >/dev/null 2>&1; then
  fail "the KV TLS port verified against a CA that did not sign it"
else
  pass "KV TLS refused by a client that does not trust the CA"
fi

# Failed KV logins over TLS lock out the client that made them, not every TLS client.
if python3 "$HERE/kv_tls_lockout_by_client.py" "$kv_tls_port" "$certs/ca.crt"; then
  pass "KV TLS lockout by the client's address"
else
  fail "KV TLS lockout by the client's address"
fi

# wait_for_log TEXT: until the node's log has TEXT (a minute at most).
wait_for_log() {
  local deadline=$((SECONDS + 60))
  until grep -q "$1" "$tmp/settee.log"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# SIGHUP: new connections get the new certificate.
cp "$certs/next.crt" "$certs/served.crt"
cp "$certs/next.key" "$certs/served.key"
kill -HUP "$pid"
wait_for_log "TLS certificate reloaded" || fail "no reload logged after SIGHUP"
expect_serial "$https_port" next
expect_serial "$kv_tls_port" next
expect_serial "$mgmt_tls_port" next
# A reload that fails keeps the certificate in use, and the node running.
echo "not a key" >"$certs/served.key"
kill -HUP "$pid"
wait_for_log "NOT reloaded" || fail "no failed reload logged"
expect_serial "$https_port" next
kill -0 "$pid" 2>/dev/null && pass "the node runs on after a failed reload" || fail "the node died on a failed reload"

# nano and PouchDB over HTTPS.
export NODE_PATH="$ROOT/tests/compat/node_modules"
if NODE_EXTRA_CA_CERTS="$certs/ca.crt" node "$HERE/https_clients.js" "$https" trusted; then
  pass "nano and PouchDB trusting the CA"
else
  fail "nano and PouchDB trusting the CA"
fi
if node "$HERE/https_clients.js" "$https" untrusted; then
  pass "nano and PouchDB without the CA are refused"
else
  fail "nano and PouchDB without the CA"
fi

if ((failures > 0)); then
  echo "tls: $failures checks FAILED" >&2
  exit 1
fi
echo "tls: all checks passed"
