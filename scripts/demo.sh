#!/usr/bin/env bash
# The quick start demo: installs only what the demo needs on Debian 12
# (a C compiler for the bundled zstd, QEMU, the guest kernel, npm for the
# web console's files), builds coffer, and runs `coffer demo` (a real VM
# backed up into a local repository with a SQLite catalog, then restored
# and checked), with the web console built in. It ends saying how to see
# the results in the console; with --serve (passed to `coffer demo`, like
# every argument) it then serves the console on 127.0.0.1 with a one-time
# login link until Ctrl-C.
#
#   scripts/demo.sh            # the demo
#   scripts/demo.sh --serve    # the demo, then its results in the console
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
for arg in "$@"; do
  if [ "$arg" = --serve ]; then exec ./coffer demo "$@"; fi
done
./coffer demo "$@"
echo "scripts/demo.sh: ./coffer is the binary just built; the demo with its results in the web console: scripts/demo.sh --serve"
