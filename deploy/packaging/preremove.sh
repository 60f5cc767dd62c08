#!/bin/sh
# Before coffer's files go (.deb prerm remove, .rpm %preun on erase):
# its services stop and are disabled. An upgrade leaves them running.
set -e
case "$1" in
  remove|0) ;;
  *) exit 0 ;;
esac
if command -v systemctl >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    systemctl stop coffer.service coffer-worker.service || true
  fi
  systemctl disable coffer.service coffer-worker.service >/dev/null 2>&1 || true
fi
