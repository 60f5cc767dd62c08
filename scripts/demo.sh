#!/usr/bin/env bash
# The quick start demo: installs only what the demo needs on Debian 12
# (a C compiler for the bundled zstd, QEMU, the guest kernel), builds
# coffer, and runs `coffer demo` (a real VM backed up into a local
# repository with a SQLite catalog, then restored and checked), with the
# web console built in.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v go >/dev/null; then
  echo "coffer needs Go >= 1.26 (https://go.dev/dl/); Debian 12's golang package is too old" >&2
  exit 1
fi
for part in base qemu guest; do bash "scripts/ci/install-$part.sh"; done
# The web console's front-end files, embedded by the build below.
bash scripts/build-ui.sh
go build -o coffer ./cmd/coffer
exec ./coffer demo "$@"
