#!/usr/bin/env bash
# Runs coffer's whole test suite: go vet and golangci-lint (.golangci.yml:
# staticcheck, ineffassign, and depguard's import rules for the
# architecture), the dependencies' licences, the changelog, a reproducible
# build, the packages, unit tests, fuzz seed corpora, and the integration tests against
# real components (QEMU guests, qemu-storage-daemon, libvirtd, an
# S3 server, PostgreSQL, vcsim, Chromium). Installs what they need first.
#
#   scripts/test.sh            # everything (CI mode: missing tools fail)
#   scripts/test.sh -short     # skips the slow crash loops and guest matrices
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ci/install-deps.sh
export COFFER_REQUIRE_INTEGRATION="${COFFER_REQUIRE_INTEGRATION:-1}"
export PATH="$PWD/.cache/bin:$PATH"
go vet ./...
# Lint before the tests: a layering violation fails in a minute, not
# after the suite.
# Parallel runners allowed: by default golangci-lint refuses to start
# while another instance runs on the machine (another checkout's tests),
# and CI then fails for nothing.
golangci-lint run --allow-parallel-runners ./...
# The dependencies' licences, the changelog's fragments, and two builds
# of HEAD giving one binary.
bash scripts/ci/check-licences.sh
bash scripts/ci/check-changelog.sh
bash scripts/ci/check-reproducible.sh
# The compatibility promise (docs/compatibility.md): the REST API keeps
# what the last release offered.
bash scripts/ci/check-compatibility.sh
# The .deb and .rpm (scripts/package.sh): lintian, their systemd units,
# and the .deb installed, run and purged in a fresh Debian 12.
bash scripts/ci/check-packages.sh
go test -timeout 60m "$@" ./...
# Builds without cgo compress with pure Go (internal/repo/chunk): keep that
# path tested too.
CGO_ENABLED=0 go test "$@" ./internal/repo/chunk/ ./internal/backup/
