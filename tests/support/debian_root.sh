#!/usr/bin/env bash
# Usage: debian_root.sh SUITE DIR
# Makes DIR a minimal Debian root of SUITE (`debootstrap --variant=minbase`) from the Debian
# mirror apt is configured with, once: a DIR already made (DIR/.plumb-complete) is kept. For
# tests/cni-entry/static_binary (ctest fixture debian11_root). debootstrap runs in a mount
# namespace of its own, so the /proc and /sys it mounts in the new root never appear elsewhere.
set -euo pipefail
suite=$1 dir=$2
[ -e "$dir/.plumb-complete" ] && exit 0
mirror=${PLUMB_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # The first deb URI of apt's sources that serves Debian's main archive (deb822 or one-line).
  mirror=$(grep -hsE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list /etc/apt/sources.list |
           grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ' || true)  # grep: 2 for a glob that matched nothing
fi
[ -n "$mirror" ] || { echo "no Debian archive in apt's sources (set PLUMB_DEBIAN_MIRROR)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (scripts/install-deps installs it)" >&2; exit 1; }
rm -rf "$dir.tmp"
mkdir -p "$(dirname "$dir")"
echo "debootstrap --variant=minbase $suite from $mirror"
if ! unshare -m debootstrap --variant=minbase "$suite" "$dir.tmp" "$mirror" >"$dir.log" 2>&1; then
  tail -n 20 "$dir.log" >&2
  echo "debootstrap of $suite from $mirror failed (log: $dir.log)" >&2
  exit 1
fi
rm -rf "$dir"
mv "$dir.tmp" "$dir"
touch "$dir/.plumb-complete"
