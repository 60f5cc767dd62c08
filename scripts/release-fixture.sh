#!/usr/bin/env bash
# Writes a release's fixture: what a coffer release leaves on disk, for
# later releases to open (internal/upgrade's TestReleaseFixtures: verify
# with --read-data, restore bit-identical, migrate the catalog, list the
# same points). Run it with the release's own binary, at the release:
#
#   scripts/build.sh /tmp/coffer-v0.2.0
#   scripts/release-fixture.sh /tmp/coffer-v0.2.0 internal/upgrade/testdata/fixtures/v0.2.0.tar.gz
#
# The tarball (about 2 MiB) holds fixture/:
#   repo/             a local repository: a full and an incremental point
#                     of one 3 MiB disk image, and two keys
#   catalog.db        the SQLite catalog at that release's schema
#   coffer.yaml       a configuration file naming them (paths relative to
#                     fixture/, where the test runs coffer)
#   password, password-2   the two keys' passwords
#   sources.sha256    the sha256 of the image each point was taken of
#   points.json       `coffer snapshots --json` as the release printed it
#   version.json      `coffer version --json` of the binary that wrote it
#   catalog-schema    the release's catalog schema version
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 COFFER_BINARY OUT.tar.gz" >&2
  exit 2
fi
bin=$(realpath "$1")
out=$(realpath -m "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fx="$work/fixture"
mkdir -p "$fx"
cd "$fx"
printf 'first key of the release fixture\n' >password
printf 'second key of the release fixture\n' >password-2
cat >coffer.yaml <<'YAML'
# The configuration file of a release fixture (scripts/release-fixture.sh).
repository: repo
password-file: password
catalog: catalog.db
log-level: warn
YAML
# The cache and the state directory stay out of the fixture: a release
# reads the repository, not another build's cache.
export COFFER_CACHE_DIR="$work/cache" COFFER_STATE_DIR="$work/state"
unset COFFER_REPO COFFER_PASSWORD_FILE COFFER_PASSWORD COFFER_CATALOG COFFER_SERVER COFFER_CONFIG
c() { "$bin" --config coffer.yaml "$@"; }
c init --key-label release-fixture --json >/dev/null
c key add --new-password-file password-2 --label second --json >/dev/null
# The source: 1 MiB of random data in a 3 MiB image (the rest zeros),
# then 256 KiB of it changed for the incremental.
img="$work/disk.raw"
head -c 1048576 /dev/urandom >"$img"
truncate -s 3M "$img"
point() { c backup disk "$img" --name fixture-vm --tag fixture=release --json | sed -n 's/^  "id": "\([0-9a-f]*\)",$/\1/p'; }
full=$(point)
echo "$(sha256sum <"$img" | cut -d' ' -f1) $full" >sources.sha256
dd if=/dev/urandom of="$img" bs=64K seek=20 count=4 conv=notrunc status=none
incr=$(point)
echo "$(sha256sum <"$img" | cut -d' ' -f1) $incr" >>sources.sha256
c snapshots --json >points.json
"$bin" version --json >version.json
# The release's schema version, read the way the release recorded it.
python3 - >catalog-schema <<'PY'
import sqlite3
print(sqlite3.connect("catalog.db").execute("SELECT MAX(version) FROM schema_migrations").fetchone()[0])
PY
rm -f catalog.db-wal catalog.db-shm catalog.db-open.lock repo/.cas-lock
mkdir -p "$(dirname "$out")"
# Sorted names, no owners, a fixed time: the tarball differs only by
# its data.
tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - fixture | gzip -n -9 >"$out"
echo "wrote $out ($(du -h "$out" | cut -f1)): points $full (full) and $incr (incremental), catalog schema $(cat catalog-schema), $(tr -d '\n' <version.json | sed 's/  */ /g')"
