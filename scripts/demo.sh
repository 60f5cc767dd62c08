#!/usr/bin/env bash
# The quick start demo: installs what coffer needs on Debian 12, builds
# coffer, and runs `coffer demo` (a real VM backed up into a local
# repository with a SQLite catalog, then restored and checked), with the
# web console built in.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci/install-deps.sh
# The web console's front-end files, embedded by the build below.
bash scripts/build-ui.sh
go build -o coffer ./cmd/coffer
exec ./coffer demo "$@"
