#!/usr/bin/env bash
# schemathesis (PyPI, pinned) in a virtual environment under .cache/, for
# the API contract test (internal/server's TestSchemathesis): it reads the
# server's OpenAPI document, sends generated requests with an API token
# and fails on any server error or response that breaks the schema. It is
# reached through the wrapper .cache/bin/coffer-schemathesis
# (scripts/test.sh puts .cache/bin on PATH); without it the test skips,
# or fails under COFFER_REQUIRE_INTEGRATION=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$PWD/.cache/bin"
mkdir -p "$bin"

v=4.32.5
venv="$PWD/.cache/schemathesis-$v"
if ! [ -x "$venv/bin/st" ] || ! "$venv/bin/python" -c 'import schemathesis' 2>/dev/null; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis==$v"
  echo "schemathesis $v installed in $venv"
fi
# A wrapper, not a symlink: a venv's interpreter finds its packages
# through pyvenv.cfg beside the path it was started by.
cat >"$bin/coffer-schemathesis.tmp" <<WRAP
#!/bin/sh
exec "$venv/bin/st" "\$@"
WRAP
chmod +x "$bin/coffer-schemathesis.tmp"
mv "$bin/coffer-schemathesis.tmp" "$bin/coffer-schemathesis"
