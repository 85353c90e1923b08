#!/usr/bin/env bash
# The Debian packages (scripts/package-deb.sh), checked without installing them: their
# contents and control data, the binary stripped with its debug info in settee-dbg under its
# build id, the systemd unit and the conffile; then the packaged binary, extracted, serves with
# the packaged configuration (addresses and data directory moved to a scratch place by flags,
# which win over the file).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/settee-package-test.XXXXXX")
pid=
trap 'stop_settee; rm -rf "$tmp"' EXIT
fail() { echo "package test: $*" >&2; exit 1; }

SETTEE_BIN=$SETTEE_BIN SKIP_BUILD=1 "$ROOT/scripts/package-deb.sh" "$tmp/out" >"$tmp/built.txt"
main_deb=$(sed -n 1p "$tmp/built.txt")
dbg_deb=$(sed -n 2p "$tmp/built.txt")

[[ $(dpkg-deb -f "$main_deb" Package) == settee ]] || fail "Package field"
[[ $(dpkg-deb -f "$dbg_deb" Depends) == "settee (= $(dpkg-deb -f "$main_deb" Version))" ]] ||
    fail "settee-dbg must depend on the same version"
dpkg-deb -c "$main_deb" >"$tmp/contents.txt"
for path in ./usr/bin/settee ./etc/settee/settee.toml ./lib/systemd/system/settee.service; do
    grep -q " $path\$" "$tmp/contents.txt" || fail "missing $path"
done
grep -q 'root/root.*\./usr/bin/settee$' "$tmp/contents.txt" || fail "files must belong to root"
dpkg-deb -e "$main_deb" "$tmp/control"
[[ $(cat "$tmp/control/conffiles") == /etc/settee/settee.toml ]] || fail "conffiles"
grep -q 'adduser --system' "$tmp/control/postinst" || fail "postinst must add the settee user"
sh -n "$tmp/control/postinst" && sh -n "$tmp/control/prerm" && sh -n "$tmp/control/postrm"

dpkg-deb -x "$main_deb" "$tmp/root"
dpkg-deb -x "$dbg_deb" "$tmp/root"
bin=$tmp/root/usr/bin/settee
readelf -S "$bin" | grep -q '\.debug_line' && fail "the packaged binary still carries debug info"
readelf -S "$bin" | grep -q '\.gnu_debuglink' || fail "no .gnu_debuglink in the packaged binary"
build_id=$(readelf -n "$bin" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
debug=$tmp/root/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
[[ -f $debug ]] || fail "settee-dbg has no debug file for build id $build_id"
readelf -S "$debug" 2>/dev/null | grep -q '\.debug_line' || fail "the debug file has no line tables"

unit=$tmp/root/lib/systemd/system/settee.service
grep -qx 'ExecStart=/usr/bin/settee serve --config /etc/settee/settee.toml' "$unit" || fail "ExecStart"
grep -qx 'User=settee' "$unit" || fail "the service must run as the settee user"
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$unit" || fail "ExecReload (SIGHUP reloads the TLS certificate)"
grep -qx 'ReadWritePaths=/var/lib/settee' "$unit" || fail "ReadWritePaths"
grep -q '^data_dir = "/var/lib/settee"$' "$tmp/root/etc/settee/settee.toml" || fail "data_dir"

# The packaged binary with the packaged configuration file.
mkdir -p "$tmp/data"
http_port=$(free_port)
kv_port=$(free_port)
((kv_port != http_port)) || kv_port=$((kv_port + 1))
mgmt_port=$(free_port)
while ((mgmt_port == http_port || mgmt_port == kv_port)); do mgmt_port=$((mgmt_port + 1)); done
"$bin" serve --config "$tmp/root/etc/settee/settee.toml" --data-dir "$tmp/data" \
    --http-addr "127.0.0.1:$http_port" --kv-addr "127.0.0.1:$kv_port" \
    --mgmt-addr "127.0.0.1:$mgmt_port" --admin admin:secret >"$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 150); do
    listening "$http_port" && break
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.log" >&2; fail "the packaged binary exited"; }
    sleep 0.2
done
base="http://admin:secret@127.0.0.1:$http_port"
curl -fsS -X PUT "$base/pkg" >/dev/null || fail "PUT /pkg"
curl -fsS -X PUT "$base/pkg/doc" -H 'content-type: application/json' -d '{"packaged":true}' >/dev/null
[[ $(curl -fsS "$base/pkg/doc") == *'"packaged":true'* ]] || fail "GET /pkg/doc"
echo "package test: ok ($(du -h "$main_deb" | cut -f1) package, build id $build_id)"
