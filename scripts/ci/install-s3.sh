#!/usr/bin/env bash
# The S3 server coffer's S3 tests start for themselves: versitygw (posix
# backend, Object Lock, conditional writes), built from a pinned module
# version into .cache/bin, which scripts/test.sh puts on PATH. The tests
# look for `versitygw` there and skip (fail under COFFER_REQUIRE_INTEGRATION=1)
# without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=v1.8.0
bin="$PWD/.cache/bin"
stamp="$bin/.versitygw-$version"
if [ -x "$bin/versitygw" ] && [ -e "$stamp" ]; then exit 0; fi
mkdir -p "$bin"
GOBIN="$bin" go install -ldflags="-s -w" "github.com/versity/versitygw/cmd/versitygw@$version"
touch "$stamp"
echo "versitygw $version installed in $bin"
