#!/usr/bin/env bash
# Builds the coffer binary the way releases are built: reproducibly
# (-trimpath, so two checkouts of one commit in different directories give
# the same bytes: scripts/ci/check-reproducible.sh checks it) and with its
# version and commit injected (`coffer version`, coffer_build_info).
#
#   scripts/build.sh              # ./coffer
#   scripts/build.sh OUT          # OUT
#
# The version is the tag at HEAD (v0.1.0); an untagged commit says how far
# it is from the last tag, git describe's way (v0.1.0-3-g1a2b3c4d5e6f), or
# from v0.0.0 before the first tag; "-dirty" marks uncommitted changes.
# The web console's files are embedded when scripts/build-ui.sh has built
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-coffer}"
pkg=github.com/coffer-backup/coffer/internal/version
version=devel
revision=unknown
if git rev-parse --git-dir >/dev/null 2>&1; then
  revision=$(git rev-parse HEAD)
  if ! version=$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null) &&
     ! version=$(git describe --tags --long --abbrev=12 --match 'v[0-9]*' 2>/dev/null); then
    version="v0.0.0-$(git rev-list --count HEAD)-g$(git rev-parse --short=12 HEAD)"
  fi
  if ! git diff --quiet HEAD -- 2>/dev/null; then version="$version-dirty"; fi
fi
go build -trimpath -buildvcs=false -ldflags "-X $pkg.version=$version -X $pkg.revision=$revision" -o "$out" ./cmd/coffer
echo "built $out: coffer $version ($revision)"
