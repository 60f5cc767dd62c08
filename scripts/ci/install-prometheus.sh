#!/usr/bin/env bash
# Prometheus from Debian, for the monitoring kit's tests: promtool checks
# and unit-tests deploy/monitoring/alerts.yml (TestAlertRules).
set -euo pipefail
if ! command -v promtool >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus
fi
