#!/usr/bin/env bash
# Installs the pinned clients (nano, PouchDB) and runs every *.test.js against a real settee.
set -euo pipefail
cd "$(dirname "$0")"
stamp=node_modules/.package-lock.json
if [ ! -d node_modules ] || [ package-lock.json -nt "$stamp" ]; then
  # --ignore-scripts: leveldown ships prebuilt binaries in the package; nothing needs compiling.
  npm ci --no-audit --no-fund --ignore-scripts
fi
exec node --test ./*.test.js
