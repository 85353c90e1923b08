#!/usr/bin/env bash
# make-certs.sh DIR: a test CA (ca.crt, ca.key), two server certificates it signed for
# 127.0.0.1 and localhost (node.crt/node.key, next.crt/next.key: the reload test swaps them),
# and a second CA nobody trusts the node's certificates with (other-ca.crt). Uses openssl.
set -euo pipefail
dir=$1
mkdir -p "$dir"
cd "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -days 2 -subj /CN=settee-test-ca -keyout ca.key -out ca.crt 2>/dev/null
openssl req -x509 "${ec[@]}" -days 2 -subj /CN=another-ca -keyout other-ca.key -out other-ca.crt 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
for name in node next; do
  openssl req "${ec[@]}" -subj "/CN=settee-$name" -keyout "$name.key" -out "$name.csr" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile san.ext -out "$name.crt" 2>/dev/null
done
