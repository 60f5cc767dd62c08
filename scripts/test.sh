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
#
# COFFER_TEST_PACKAGES_AT_ONCE is go test's -p, how many test packages run
# at once: by default one per core, and at least 4.
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
bash scripts/ci/check-changelog.sh
# The checks that wait on the network, the disk and a chroot more than
# they compute run beside the tests, one after the other, and the script
# fails at the end if one failed (their output is printed then, and a
# failure at once): the dependencies' licences, two builds of HEAD giving
# one binary, the compatibility promise (docs/compatibility.md: the REST
# API keeps what the last release offered), the .deb and .rpm
# (scripts/package.sh: lintian, their systemd units, and the .deb
# installed, run and purged in a fresh Debian 12), and the tests of a
# build without cgo, which compresses with pure Go (internal/repo/chunk):
# that path is tested too.
checks_log=$(mktemp)
trap 'rm -f "$checks_log"' EXIT
exec 3>&2
(
  failed() {
    echo "test.sh: $* failed (its output follows the tests')" >&3
    echo "test.sh: $* failed"
    exit 1
  }
  for c in check-licences check-reproducible check-compatibility check-packages; do
    bash "scripts/ci/$c.sh" || failed "scripts/ci/$c.sh"
  done
  CGO_ENABLED=0 go test "$@" ./internal/repo/chunk/ ./internal/backup/ || failed "the tests without cgo"
) >"$checks_log" 2>&1 &
checks=$!
# The packages, longest first (seconds in the last full run, December
# 2026, 2 cores), so that none of them starts last and runs alone; the
# rest follow in go's order (go test runs each package once). Many spend
# most of their time waiting (for a guest, a server, a lease, a worker's
# heartbeat: workercmd's tests used a third of a core, bootverify's a
# fifth), so go test runs at least four packages at a time where its
# default is one per core.
slowest=()
for p in cli/workercmd:534 cli/repocmd:354 bootverify:291 console:237 hypervisor/libvirt:150 \
  server:148 hypervisor/qemu:142 cli/backupcmd:110 cli/servercmd:95 storagesnap:80 \
  cli/restorecmd:79 failover:51 service:41 hypervisor/vsphere:37 store/s3:37 fleet/queue:33 \
  cli/replicacmd:33; do
  # (a package renamed since is left to ./...)
  [ -d "internal/${p%%:*}" ] && slowest+=("./internal/${p%%:*}")
done
status=0
at_once="${COFFER_TEST_PACKAGES_AT_ONCE:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}"
go test -timeout 60m -p "$at_once" "$@" "${slowest[@]}" ./... || status=$?
wait "$checks" || status=$?
cat "$checks_log"
exit "$status"
