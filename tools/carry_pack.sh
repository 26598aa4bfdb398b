#!/usr/bin/env bash
# Packs built files for a device call into .carry/bins.txz (paths kept relative to the repository
# root), stripped and xz-compressed: the device call's 64 MiB covers the checkout (about 36 MiB)
# and the carried paths, and four binaries uncompressed exceed what is left. On the device:
#   tar xJf .carry/bins.txz
# Usage: bash tools/carry_pack.sh build/release/cnnbench build/release/tests/test_gpu ...
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: $0 FILE..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$@"; do
  [ -e "$f" ] || { echo "carry_pack: $f does not exist (build first)" >&2; exit 1; }
  mkdir -p "$tmp/$(dirname "$f")"
  cp -a "$f" "$tmp/$f"
  if [ -f "$f" ] && file -b "$f" | grep -q ELF; then strip "$tmp/$f"; fi
done
mkdir -p .carry
tar cJf .carry/bins.txz -C "$tmp" "$@"
ls -la .carry/bins.txz
