#!/usr/bin/env bash
# Long crash and damage loops, not run in CI: every kill loop of the suite
# with COFFER_SOAK kills per backend (default 200), and the damage loop over
# random offsets. Results go to stdout; docs/soak.md records a run.
#
#   scripts/soak.sh            # 200 kills per loop and backend
#   COFFER_SOAK=500 scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci/install-deps.sh
export COFFER_REQUIRE_INTEGRATION=1 COFFER_SOAK="${COFFER_SOAK:-200}"
export PATH="$PWD/.cache/bin:$PATH"
go test -count=1 -timeout 6h -v -run 'KillNineDuring|CrashPoints|DamageAtRandomOffsets' ./internal/cli/repocmd/ 2>&1 |
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|killed|interrupted|damaged'
