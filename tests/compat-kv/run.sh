#!/usr/bin/env bash
# The official Couchbase SDKs (Python `couchbase`, Node.js `couchbase`, Go `gocb`) against a real
# settee process. Installs the pinned SDKs idempotently (a second run installs nothing), then runs
# the three suites; each suite starts its own settee ($SETTEE_BIN). Exits non-zero if any test
# fails or if a suite ran no tests. Works unattended (CI=true, no stdin) on a fresh clone.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
export SETTEE_BIN="${SETTEE_BIN:-$HOME/.cache/settee/target/release/settee}"
# The Go the module asks for; when no such Go is on the PATH, GO_TOOLCHAIN_VERSION is installed.
GO_VERSION_MIN="$(awk '$1 == "go" { print $2 }' "$HERE/go/go.mod")"
GO_TOOLCHAIN_VERSION=1.24.6
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/settee-compat-kv-logs.XXXXXX")"
trap 'rm -rf "$LOGS"' EXIT

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install() {
  echo "installing Debian packages: $*"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

# --- installs ------------------------------------------------------------------------------

install_python() {
  local python=python3
  if ! command -v "$python" >/dev/null 2>&1 || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    apt_install python3 python3-venv
  fi
  cd "$HERE/python"
  local stamp=.venv/.requirements.sha256
  local wanted
  wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --only-binary couchbase -r requirements.txt
    echo "$wanted" > "$stamp"
  fi
  .venv/bin/python -c 'import couchbase.cluster, acouchbase.cluster'
}

install_node() {
  cd "$HERE/node"
  local stamp=node_modules/.package-lock.json
  if [ ! -d node_modules ] || [ package-lock.json -nt "$stamp" ]; then
    # --ignore-scripts: the native binding comes prebuilt in an optional dependency package
    # (@couchbase/couchbase-<platform>-napi); nothing needs compiling.
    npm ci --no-audit --no-fund --ignore-scripts
  fi
  node -e 'require("couchbase")' || { echo "the couchbase native binding does not load" >&2; return 1; }
}

go_is_recent() {
  command -v go >/dev/null 2>&1 || return 1
  local version
  version="$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed 's/^go//')"
  [ -n "$version" ] && [ "$(printf '%s\n%s\n' "$GO_VERSION_MIN" "$version" | sort -V | head -1)" = "$GO_VERSION_MIN" ]
}

# Downloads the official Go release into $1: the go.dev tarball, or else the same toolchain as
# the Go module golang.org/toolchain from the module proxy (what `GOTOOLCHAIN=auto` fetches).
download_go() {
  local target="$1" arch
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) echo "no Go toolchain for $(uname -m)" >&2; return 1 ;;
  esac
  rm -rf "$target" && mkdir -p "$target"
  if curl -sSfL --max-time 300 "https://go.dev/dl/go$GO_TOOLCHAIN_VERSION.linux-$arch.tar.gz" \
      | tar -xz -C "$target" --strip-components=1 2>/dev/null; then
    return 0
  fi
  echo "go.dev unreachable; fetching golang.org/toolchain from the Go module proxy"
  local module="golang.org/toolchain@v0.0.1-go$GO_TOOLCHAIN_VERSION.linux-$arch"
  local zip="$target.zip"
  curl -sSfL --max-time 300 -o "$zip" \
    "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/v0.0.1-go$GO_TOOLCHAIN_VERSION.linux-$arch.zip"
  rm -rf "$target" && mkdir -p "$target"
  python3 - "$zip" "$target" "$module/" <<'PY'
import os, sys, zipfile
archive, target, prefix = sys.argv[1:]
with zipfile.ZipFile(archive) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        path = os.path.join(target, info.filename[len(prefix):])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as dst:
            dst.write(src.read())
        # Module zips carry no permissions: the binaries are made executable the way `go` does.
        relative = info.filename[len(prefix):]
        if relative.startswith("bin/") or relative.startswith("pkg/tool/"):
            os.chmod(path, 0o755)
PY
  rm -f "$zip"
}

install_go() {
  local cached="$HOME/.cache/settee/go-$GO_TOOLCHAIN_VERSION"
  if ! go_is_recent && [ -x "$cached/bin/go" ]; then
    export PATH="$cached/bin:$PATH"
  fi
  if ! go_is_recent; then
    echo "installing Go $GO_TOOLCHAIN_VERSION into $cached"
    download_go "$cached.partial"
    rm -rf "$cached" && mv "$cached.partial" "$cached"
    export PATH="$cached/bin:$PATH"
    go_is_recent || { echo "the installed Go does not run" >&2; return 1; }
  fi
  cd "$HERE/go"
  go mod download
}

# --- suites --------------------------------------------------------------------------------

failed=()

# check NAME COUNT STATUS: records the suite as failed if it failed or ran no tests.
check() {
  local name="$1" count="$2" status="$3"
  if [ "$status" != 0 ]; then
    failed+=("$name (exit $status; $count passed)")
  elif [ "$count" -eq 0 ]; then
    failed+=("$name (no tests ran)")
  else
    echo "== $name: $count tests passed"
  fi
}

run_python() {
  echo "== compat-kv: Python couchbase SDK"
  local status=0
  (cd "$HERE/python" && .venv/bin/python -m pytest -p no:cacheprovider -q -rfE) 2>&1 | tee "$LOGS/python" || status=$?
  local count
  count="$(grep -Eo '[0-9]+ passed' "$LOGS/python" | tail -1 | cut -d' ' -f1 || true)"
  check python "${count:-0}" "$status"
}

run_node() {
  echo "== compat-kv: Node.js couchbase SDK"
  local status=0
  (cd "$HERE/node" && node --test --test-reporter=tap ./*.test.js) 2>&1 | tee "$LOGS/node" || status=$?
  local count
  count="$(grep -E '^# pass [0-9]+' "$LOGS/node" | tail -1 | cut -d' ' -f3 || true)"
  check node "${count:-0}" "$status"
}

run_go() {
  echo "== compat-kv: Go gocb SDK"
  local status=0
  (cd "$HERE/go" && go test -count=1 -v ./...) 2>&1 | tee "$LOGS/go" || status=$?
  local count
  count="$(grep -cE '^\s*--- PASS' "$LOGS/go" || true)"
  check go "${count:-0}" "$status"
}

if [ ! -x "$SETTEE_BIN" ]; then
  echo "no settee binary at $SETTEE_BIN (build it: cargo build --release -p settee)" >&2
  exit 1
fi
(install_python)
(install_node)
install_go
run_python
run_node
run_go

if [ "${#failed[@]}" -gt 0 ]; then
  echo "compat-kv FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "compat-kv: all suites passed"
