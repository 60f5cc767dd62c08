#!/usr/bin/env bash
# The SMTP server the notification tests start for themselves: aiosmtpd
# (PyPI, pinned) in a virtual environment under .cache/, reached through
# the wrapper .cache/bin/coffer-aiosmtpd-python (scripts/test.sh puts
# .cache/bin on PATH). The tests run internal/testutil's small script
# around aiosmtpd's Controller (TLS, AUTH, one file per received message)
# with it; without it they skip, or fail under COFFER_REQUIRE_INTEGRATION=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="$PWD/.cache/bin"
mkdir -p "$bin"

v=1.4.6
venv="$PWD/.cache/aiosmtpd-$v"
if ! [ -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import aiosmtpd' 2>/dev/null; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  fi
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "aiosmtpd==$v"
  echo "aiosmtpd $v installed in $venv"
fi
# A wrapper, not a symlink: a venv's interpreter finds its packages
# through pyvenv.cfg beside the path it was started by.
cat >"$bin/coffer-aiosmtpd-python.tmp" <<WRAP
#!/bin/sh
exec "$venv/bin/python" "\$@"
WRAP
chmod +x "$bin/coffer-aiosmtpd-python.tmp"
mv "$bin/coffer-aiosmtpd-python.tmp" "$bin/coffer-aiosmtpd-python"
