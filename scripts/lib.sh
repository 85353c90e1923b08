# Shared by the scripts: installs what settee needs on a Debian machine, idempotently.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/settee/target}"
export PATH="$HOME/.cargo/bin:$PATH"
SETTEE_BIN="$CARGO_TARGET_DIR/release/settee"
export SETTEE_BIN

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_system_packages() {
  # g++ and libclang-dev build RocksDB from source (Debian's librocksdb is too old);
  # openssl makes the test CAs and certificates of the TLS tests; iproute2 (ip) and
  # util-linux (nsenter) make the network namespaces of the chaos test's partitions.
  local wanted=(g++ make clang libclang-dev pkg-config curl ca-certificates nodejs npm openssl iproute2 util-linux)
  local missing=()
  for package in "${wanted[@]}"; do
    # nodejs/npm may come from elsewhere (nvm, a tarball): a working command is enough.
    case "$package" in
      nodejs) command -v node >/dev/null 2>&1 && continue ;;
      npm) command -v npm >/dev/null 2>&1 && continue ;;
    esac
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    echo "installing the Rust toolchain (rustup)"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
  fi
}

# Every build of a test leaves a new ~430 MB executable (RocksDB is linked statically) next
# to the old ones; keep only the newest of each name so the shared cache stays bounded.
prune_stale_executables() {
  local deps="$CARGO_TARGET_DIR/release/deps"
  [ -d "$deps" ] || return 0
  local -A seen=()
  find "$deps" -maxdepth 1 -type f -perm -u+x -regextype posix-extended \
      -regex '.*/.+-[0-9a-f]{16}' -printf '%T@ %f\n' \
    | sort -rn \
    | while read -r _ file; do
        name="${file%-*}"
        if [ -n "${seen[$name]:-}" ]; then rm -f "$deps/$file"; else seen[$name]=1; fi
      done
}
build_release() {
  mkdir -p "$CARGO_TARGET_DIR"
  prune_stale_executables
  (cd "$ROOT" && cargo build --release --locked --bin settee)
}

# Loopback helpers of the bench scripts.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
  local port=$((20000 + RANDOM % 20000))
  while listening "$port"; do port=$((port + 1)); done
  echo "$port"
}

# start_settee BINARY DATA_DIR LOG [EXTRA_ARGS...]: starts a node on three free loopback ports
# (admin admin:secret) and waits until it listens; sets http_port, kv_port, mgmt_port and pid.
# Returns 1 (with the log's tail) if it exits or does not listen within a minute.
start_settee() {
  local binary=$1 data=$2 log=$3 deadline
  shift 3
  http_port=$(free_port)
  kv_port=$(free_port)
  ((kv_port != http_port)) || kv_port=$((kv_port + 1))
  mgmt_port=$(free_port)
  while ((mgmt_port == http_port || mgmt_port == kv_port)); do mgmt_port=$((mgmt_port + 1)); done
  "$binary" serve --data-dir "$data" --http-addr "127.0.0.1:$http_port" \
    --kv-addr "127.0.0.1:$kv_port" --mgmt-addr "127.0.0.1:$mgmt_port" \
    --admin admin:secret "$@" >"$log" 2>&1 &
  pid=$!
  deadline=$((SECONDS + 60))
  until listening "$http_port" && listening "$kv_port"; do
    kill -0 "$pid" 2>/dev/null || { tail -n 40 "$log" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "settee did not start" >&2; return 1; }
    sleep 0.2
  done
}

# stop_settee: stops the node start_settee started, if it still runs.
stop_settee() {
  [[ -z ${pid:-} ]] || { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
  pid=
}

# bench_scratch NAME: a temporary directory in $tmp; on exit the node is stopped and the
# directory removed.
bench_scratch() {
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-$1.XXXXXX")
  pid=
  trap 'stop_settee; rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM
}
