#!/usr/bin/env bash
# Builds the Debian packages of settee from the release binary:
#   settee_VERSION_ARCH.deb      the stripped binary, a systemd unit, /etc/settee/settee.toml
#                                (a conffile), maintainer scripts that add the `settee` system
#                                user owning /var/lib/settee;
#   settee-dbg_VERSION_ARCH.deb  the binary's debug info, split off, under
#                                /usr/lib/debug/.build-id/ (gdb and perf find it by build id).
#
#   scripts/package-deb.sh [OUT_DIR]          (default: target-dir/debian)
#
# Environment: SETTEE_BIN (the binary to package; default the release build, built first
# unless SKIP_BUILD=1), VERSION (default the workspace version).
set -euo pipefail
settee_bin_override=${SETTEE_BIN:-}
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if [[ -n $settee_bin_override ]]; then
    SETTEE_BIN=$settee_bin_override
elif [[ ${SKIP_BUILD:-} != 1 ]]; then
    build_release
fi
[[ -x $SETTEE_BIN ]] || { echo "package-deb: no binary at $SETTEE_BIN" >&2; exit 1; }
for tool in dpkg-deb objcopy readelf; do
    command -v "$tool" >/dev/null || apt_install dpkg binutils
done

out=${1:-$CARGO_TARGET_DIR/debian}
version=${VERSION:-$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)}
arch=$(dpkg --print-architecture)
work=$(mktemp -d "${TMPDIR:-/tmp}/settee-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

build_id=$(readelf -n "$SETTEE_BIN" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
[[ ${#build_id} -gt 2 ]] || { echo "package-deb: the binary has no build id" >&2; exit 1; }

# The main package.
pkg=$work/settee
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/etc/settee" "$pkg/lib/systemd/system" \
    "$pkg/usr/share/doc/settee"
objcopy --only-keep-debug --compress-debug-sections=zlib "$SETTEE_BIN" "$work/settee.debug"
objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$work/settee.debug" \
    "$SETTEE_BIN" "$pkg/usr/bin/settee"
chmod 0755 "$pkg/usr/bin/settee"
install -m 0644 "$ROOT/packaging/debian/settee.toml" "$pkg/etc/settee/settee.toml"
install -m 0644 "$ROOT/packaging/debian/settee.service" "$pkg/lib/systemd/system/settee.service"
install -m 0644 "$ROOT/README.md" "$pkg/usr/share/doc/settee/README.md"
for script in postinst prerm postrm; do
    install -m 0755 "$ROOT/packaging/debian/$script" "$pkg/DEBIAN/$script"
done
echo /etc/settee/settee.toml >"$pkg/DEBIAN/conffiles"
installed_kb=$(du -sk "$pkg" | cut -f1)
cat >"$pkg/DEBIAN/control" <<EOF
Package: settee
Version: $version
Architecture: $arch
Maintainer: settee developers <settee@localhost>
Section: database
Priority: optional
Installed-Size: $installed_kb
Depends: libc6, libstdc++6, libgcc-s1, adduser
Homepage: file:///usr/share/doc/settee/README.md
Description: document database speaking the CouchDB API and the Couchbase KV protocol
 settee serves the same JSON documents through the Apache CouchDB HTTP API (curl, PouchDB,
 nano, CouchDB replication) and the Couchbase KV binary protocol (the official Couchbase
 SDKs, sub-document operations included). The package runs one node as the systemd service
 settee.service, configured in /etc/settee/settee.toml, with its data in /var/lib/settee.
EOF
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$out/settee_${version}_${arch}.deb" >/dev/null

# The debug-info package.
dbg=$work/settee-dbg
debug_path=usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
install -d "$dbg/DEBIAN" "$(dirname "$dbg/$debug_path")"
install -m 0644 "$work/settee.debug" "$dbg/$debug_path"
cat >"$dbg/DEBIAN/control" <<EOF
Package: settee-dbg
Version: $version
Architecture: $arch
Maintainer: settee developers <settee@localhost>
Section: debug
Priority: optional
Installed-Size: $(du -sk "$dbg" | cut -f1)
Depends: settee (= $version)
Description: debug info for settee
 The DWARF line tables of /usr/bin/settee (build id $build_id), for symbolised backtraces,
 gdb and perf.
EOF
dpkg-deb --root-owner-group -Zxz --build "$dbg" "$out/settee-dbg_${version}_${arch}.deb" >/dev/null
echo "$out/settee_${version}_${arch}.deb"
echo "$out/settee-dbg_${version}_${arch}.deb"
