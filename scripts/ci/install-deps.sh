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
for f in "$here"/install-*.sh; do
  [ "$(basename "$f")" = install-deps.sh ] && continue
  bash "$f"
done
go mod download
