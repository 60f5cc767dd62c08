#!/usr/bin/env bash
# What building coffer needs on Debian 12 besides Go: gcc and libc6-dev
# (cgo builds the bundled C zstd; without them Go builds coffer with the
# slower pure-Go compressor), and the disk tools the demo and tests use.
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
pkgs=(e2fsprogs util-linux zstd gcc libc6-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
