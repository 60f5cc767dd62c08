#!/usr/bin/env bash
# Installs everything coffer's demo and tests need on a fresh Debian 12
# machine, idempotently. Each component has its own fragment in this
# directory; this script runs them all.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v go >/dev/null; then
  echo "coffer needs Go >= 1.26 (https://go.dev/dl/); Debian 12's golang package is too old" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
# gcc and libc6-dev: cgo builds the bundled C zstd (without them Go builds
# coffer with the slower pure-Go compressor).
pkgs=(e2fsprogs util-linux zstd gcc libc6-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
for f in "$here"/install-*.sh; do
  [ "$(basename "$f")" = install-deps.sh ] && continue
  bash "$f"
done
go mod download
