#!/usr/bin/env bash
# PostgreSQL server binaries for the catalog's PostgreSQL tests. The tests
# start their own throwaway server (initdb into a temporary directory,
# 127.0.0.1 on a free port, run as the postgres user), so no cluster is
# created or started here: postgresql-common is told not to create the
# default one (as the official Docker image does). Debian's `postgresql`
# package brings the current major version (15 on Debian 12) into
# /usr/lib/postgresql/<version>/bin.
set -euo pipefail
SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends postgresql-common
$SUDO sed -ri 's/#?(create_main_cluster) .*$/\1 = false/' /etc/postgresql-common/createcluster.conf
$SUDO apt-get install -y -qq --no-install-recommends postgresql
