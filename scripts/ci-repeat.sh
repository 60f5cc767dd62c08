#!/usr/bin/env bash
# Runs CI (.ci/run) N times in a row on fresh clones of this repository's
# HEAD while another process keeps one core busy, as the trust issue asks:
# a flaky test shows up here before it shows up in CI.
#
#   scripts/ci-repeat.sh 10 [--no-load]
set -euo pipefail
n="${1:-10}"
load=1
[ "${2:-}" = "--no-load" ] && load=0
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/coffer-ci-repeat.XXXXXX)"
# CI clones main with ../shared beside it.
ln -s "$(cd "$here/../shared" && pwd)" "$work/shared"
hog=""
if [ "$load" = 1 ]; then
  (while :; do :; done) &
  hog=$!
  trap 'kill $hog 2>/dev/null || true' EXIT
fi
for i in $(seq 1 "$n"); do
  rm -rf "$work/main"
  git clone -q "$here" "$work/main"
  # Every run starts with an empty test cache, as on a fresh machine:
  # otherwise runs 2..N replay run 1's results and prove nothing.
  if command -v go >/dev/null; then go clean -testcache; fi
  start=$(date +%s)
  if (cd "$work/main" && bash .ci/run) >"$work/run-$i.log" 2>&1; then
    echo "run $i: passed in $(( $(date +%s) - start )) s"
  else
    echo "run $i: FAILED after $(( $(date +%s) - start )) s (log: $work/run-$i.log)"
    grep -E '^(--- FAIL|FAIL|panic)' "$work/run-$i.log" | head -20
    exit 1
  fi
done
echo "$n runs passed (logs in $work)"
