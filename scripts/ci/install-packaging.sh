#!/usr/bin/env bash
# Debian's tools for the packages' checks (scripts/ci/check-packages.sh):
# lintian, and mmdebstrap for a fresh bookworm to install the .deb into.
set -euo pipefail
if ! command -v lintian >/dev/null || ! command -v mmdebstrap >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends lintian mmdebstrap
fi
