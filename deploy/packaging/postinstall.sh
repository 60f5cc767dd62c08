#!/bin/sh
# After coffer's files are in place (.deb postinst configure, .rpm %post):
# the coffer user and its groups (sysusers.d), its directories
# (tmpfiles.d). The service is not enabled: systemctl enable --now coffer.
set -e
case "$1" in
  configure|1|2) ;;
  *) exit 0 ;;
esac
if command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers coffer.conf
elif ! getent passwd coffer >/dev/null; then
  # No systemd: the same user by hand.
  useradd --system --user-group --home-dir /var/lib/coffer --no-create-home \
    --shell /usr/sbin/nologin --comment "coffer backup" coffer
  for g in kvm libvirt tape; do
    getent group "$g" >/dev/null || groupadd --system "$g"
    usermod --append --groups "$g" coffer
  done
fi
if command -v systemd-tmpfiles >/dev/null 2>&1; then
  systemd-tmpfiles --create coffer.conf
else
  install -d -m 0750 -o coffer -g coffer /var/lib/coffer /var/cache/coffer
fi
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
  # An upgrade (.deb: configure with the old version; .rpm: 2) restarts
  # the services that run, which drain first; an install starts none.
  if [ -n "${2:-}" ] || [ "$1" = 2 ]; then
    systemctl try-restart coffer.service coffer-worker.service || true
  fi
fi
