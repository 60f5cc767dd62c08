#!/usr/bin/env bash
# golangci-lint, which scripts/test.sh runs with .golangci.yml (depguard
# holds docs/12-architecture.md's layering as import rules), built from a pinned
# module version into .cache/bin.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$PWD/.cache/bin"
mkdir -p "$bin"

v=v2.15.0
if ! [ -x "$bin/golangci-lint" ] || ! [ -e "$bin/.golangci-lint-$v" ]; then
  GOBIN="$bin" go install -ldflags="-s -w" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$v"
  touch "$bin/.golangci-lint-$v"
  echo "golangci-lint $v installed in $bin"
fi
