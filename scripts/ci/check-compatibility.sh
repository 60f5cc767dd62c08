#!/usr/bin/env bash
# Holds docs/compatibility.md's promise for the REST API: nothing the last
# release's OpenAPI document offered may be removed or changed
# incompatibly (oasdiff, pinned, built into .cache/bin). The exit codes
# and the --json documents' field names are held by Go tests
# (internal/cli/command's and internal/api's frozen lists).
#
#   scripts/ci/check-compatibility.sh
#
# The baseline is release/<previous>/openapi.json, <previous> being the
# first word of release/previous (the last release's tag).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$PWD/.cache/bin"
mkdir -p "$bin"
v=v1.39.0
if ! [ -x "$bin/oasdiff" ] || ! [ -e "$bin/.oasdiff-$v" ]; then
  GOBIN="$bin" go install "github.com/oasdiff/oasdiff@$v"
  touch "$bin/.oasdiff-$v"
  echo "oasdiff $v installed in $bin"
fi
prev=$(awk '{print $1; exit}' release/previous)
base="release/$prev/openapi.json"
if ! [ -f "$base" ]; then
  echo "check-compatibility: $base is missing: every release commits its OpenAPI document (docs/upgrading.md)" >&2
  exit 1
fi
# --fail-on ERR: a breaking change fails; oasdiff's warnings (a change
# that may break a client) are printed, not fatal.
"$bin/oasdiff" breaking --fail-on ERR "$base" docs/api/openapi.json
echo "check-compatibility: the REST API keeps what $prev offered"
