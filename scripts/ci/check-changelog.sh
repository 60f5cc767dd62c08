#!/usr/bin/env bash
# Two checks on the changelog (scripts/changelog.sh):
# - CHANGELOG.md is what the fragments generate;
# - every change on main's first-parent line since this rule began (a
#   commit, or a merge as a whole) that touches internal/ adds a fragment
#   under changelog/, or says why none is needed with a trailer in its
#   message: "Changelog: none (tests only)".
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go tool calens -o "$out"
if ! diff -u CHANGELOG.md "$out" >&2; then
  echo "check-changelog: CHANGELOG.md is not what changelog/ generates: run scripts/changelog.sh" >&2
  exit 1
fi
start=$(git log --diff-filter=A --format=%H -- scripts/ci/check-changelog.sh | tail -1)
missing=0
for c in $(git rev-list --first-parent "$start..HEAD"); do
  changed=$(git diff --name-only "$c^1" "$c")
  grep -q '^internal/' <<<"$changed" || continue
  grep -q '^changelog/' <<<"$changed" && continue
  [ -n "$(git log -1 --format='%(trailers:key=Changelog,valueonly)' "$c")" ] && continue
  echo "check-changelog: $(git log -1 --format='%h %s' "$c") changes internal/ without a changelog/ fragment or a \"Changelog: none (why)\" trailer" >&2
  missing=1
done
exit "$missing"
