#!/usr/bin/env bash
# Assembles CHANGELOG.md from the fragments in changelog/ with calens
# (restic's changelog tool, pinned as a tool in go.mod): one fragment per
# change in changelog/unreleased/ (changelog/TEMPLATE shows the form), one
# directory per release (changelog/0.1.0_2027-01-15/).
#
#   scripts/changelog.sh                   # regenerate CHANGELOG.md
#   scripts/changelog.sh --release 0.1.0   # move unreleased/ into the release's
#                                          # directory, dated today, then regenerate
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --release ]; then
  v="${2:?--release needs a version, e.g. 0.1.0}"
  dir="changelog/${v#v}_$(date -u +%F)"
  [ -d changelog/unreleased ] || { echo "changelog.sh: nothing unreleased" >&2; exit 1; }
  git mv changelog/unreleased "$dir"
  echo "changelog.sh: the release's changes are in $dir"
fi
go tool calens -o CHANGELOG.md
