# Shared by the scripts that run Go code (tests/compat-kv/run.sh, tests/chaos/run.sh,
# scripts/chaos): puts a Go recent enough for a module on the PATH, idempotently.
#
#   source scripts/go-toolchain.sh
#   install_go DIR    # DIR holds a go.mod; its `go` line is the oldest Go that will do
#
# A recent enough `go` already on the PATH is used as it is. Otherwise Go
# $GO_TOOLCHAIN_VERSION is installed once into ~/.cache/settee/go-VERSION — the go.dev tarball,
# or the same toolchain from the Go module proxy when go.dev is unreachable — and put first on
# the PATH. Then the module's dependencies are downloaded. Needs curl, tar and python3.

GO_TOOLCHAIN_VERSION="${GO_TOOLCHAIN_VERSION:-1.24.6}"

# go_is_recent MIN: whether the `go` on the PATH is at least version MIN.
go_is_recent() {
  local wanted="$1" version
  command -v go >/dev/null 2>&1 || return 1
  version="$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null | sed 's/^go//')"
  [ -n "$version" ] && [ "$(printf '%s\n%s\n' "$wanted" "$version" | sort -V | head -1)" = "$wanted" ]
}

# download_go TARGET: the official Go release into TARGET: the go.dev tarball, or else the same
# toolchain as the Go module golang.org/toolchain from the module proxy (what
# `GOTOOLCHAIN=auto` fetches).
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

# install_go DIR: a Go at least as recent as DIR/go.mod asks for on the PATH, and DIR's
# dependencies downloaded.
install_go() {
  local dir="$1" wanted
  wanted="$(awk '$1 == "go" { print $2 }' "$dir/go.mod")"
  local cached="$HOME/.cache/settee/go-$GO_TOOLCHAIN_VERSION"
  if ! go_is_recent "$wanted" && [ -x "$cached/bin/go" ]; then
    export PATH="$cached/bin:$PATH"
  fi
  if ! go_is_recent "$wanted"; then
    echo "installing Go $GO_TOOLCHAIN_VERSION into $cached"
    download_go "$cached.partial"
    rm -rf "$cached" && mv "$cached.partial" "$cached"
    export PATH="$cached/bin:$PATH"
    go_is_recent "$wanted" || { echo "the installed Go does not run" >&2; return 1; }
  fi
  (cd "$dir" && go mod download)
}
