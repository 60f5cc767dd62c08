#!/bin/sh
# After coffer's files are gone (.deb postrm, .rpm %postun). A purge of
# the .deb removes what coffer made: its catalog, state and cache. It
# keeps the coffer user and group, as Debian packages do, so that files
# it owns elsewhere (a repository) never pass to a later user of its id.
set -e
if [ "$1" = purge ]; then
  rm -rf /var/lib/coffer /var/cache/coffer
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
