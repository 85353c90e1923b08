#!/usr/bin/env bash
# Installs the pinned clients (nano, PouchDB) and runs every *.test.js against a real settee,
# then again against a 3-node cluster (SETTEE_CLUSTER, harness.js; two files at once, each with
# its own cluster; the tests a settee gap skips there say why).
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.package-lock.json
if [ ! -d node_modules ] || [ package-lock.json -nt "$stamp" ]; then
  # --ignore-scripts: leveldown ships prebuilt binaries in the package; nothing needs compiling.
  npm ci --no-audit --no-fund --ignore-scripts
fi
node --test ./*.test.js
echo "== compat: the same files against a 3-node cluster"
SETTEE_CLUSTER=3 node --test --test-concurrency=2 ./*.test.js
