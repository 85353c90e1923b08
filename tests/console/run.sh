#!/usr/bin/env bash
# The web console in headless Chromium against a real settee (console.test.js). Installs
# Debian's chromium and chromium-driver if they are missing and playwright-core from
# package-lock.json (it downloads no browser); screenshots and figures go to
# tests/console/output/.
#   UPDATE_DOCS_IMG=1  also copy the overview and queries screenshots to docs/img/
#   BENCH_DOCS=N       first fill a database with N documents and report each page's load
#                      time on it (the long form; not asserted)
source "$(dirname "$0")/../../scripts/lib.sh"
HERE="$ROOT/tests/console"

missing=()
for package in chromium chromium-driver; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi
stamp="$HERE/node_modules/.package-lock.json"
if [ ! -f "$stamp" ] || [ "$HERE/package-lock.json" -nt "$stamp" ]; then
  (cd "$HERE" && npm ci --no-audit --no-fund --ignore-scripts >/dev/null)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-console.XXXXXX")
pid=
trap 'stop_settee; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
output="$HERE/output"
rm -rf "$output"
mkdir -p "$output"

start_settee "$SETTEE_BIN" "$tmp/data" "$tmp/settee.log"
url="http://127.0.0.1:$http_port"

bench_db=
if [[ -n ${BENCH_DOCS:-} ]]; then
  bench_db=console_bench
  echo "filling $bench_db with $BENCH_DOCS documents"
  curl -sf -u admin:secret -X PUT "$url/$bench_db" >/dev/null
  SETTEE_URL=$url node "$HERE/fill.js" "$bench_db" "$BENCH_DOCS"
fi

status=0
(cd "$HERE" && SETTEE_URL=$url OUTPUT_DIR=$output BENCH_DB=$bench_db node --test console.test.js) || status=$?
if ((status != 0)); then
  echo "--- settee log (tail)" >&2
  tail -n 30 "$tmp/settee.log" >&2
  exit "$status"
fi
if [[ ${UPDATE_DOCS_IMG:-} == 1 ]]; then
  mkdir -p "$ROOT/docs/img"
  cp "$output/overview.png" "$ROOT/docs/img/console-overview.png"
  cp "$output/queries.png" "$ROOT/docs/img/console-queries.png"
fi
echo "console: screenshots in ${output#"$ROOT"/}: $(cd "$output" && ls -- *.png | tr '\n' ' ')"
