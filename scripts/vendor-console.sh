#!/usr/bin/env bash
# Fetches the web console's front-end libraries from the npm registry (`npm pack` of a pinned
# version), checks each tarball's sha256 and copies the built files with their LICENSE into
# crates/console/assets/vendor/NAME-VERSION/. The result is committed, so building settee needs
# neither the network nor Node; run this only to change a version (then update the sha256 and
# the asset table in crates/console/src/assets.rs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENDOR="$ROOT/crates/console/assets/vendor"

# name version sha256-of-the-npm-tarball files-to-keep (paths inside the package)
PACKAGES=(
  "uplot 1.6.32 4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d dist/uPlot.iife.min.js dist/uPlot.min.css LICENSE"
)

work=$(mktemp -d "${TMPDIR:-/tmp}/settee-vendor.XXXXXX")
trap 'rm -rf "$work"' EXIT
for line in "${PACKAGES[@]}"; do
  read -r name version sha256 files <<<"$line"
  (cd "$work" && npm pack --silent "$name@$version" >/dev/null)
  tarball="$work/$name-$version.tgz"
  got=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [[ $got != "$sha256" ]]; then
    echo "$name@$version: sha256 $got, expected $sha256" >&2
    exit 1
  fi
  mkdir -p "$work/$name"
  tar -xzf "$tarball" -C "$work/$name"
  target="$VENDOR/$name-$version"
  rm -rf "$target"
  mkdir -p "$target"
  for file in $files; do
    cp "$work/$name/package/$file" "$target/$(basename "$file")"
  done
  echo "$name@$version -> ${target#"$ROOT"/} ($(ls "$target" | tr '\n' ' '))"
done
