#!/usr/bin/env bash
# OpenLDAP's server and tools from Debian, for the sign-in realms' tests:
# internal/testutil/slapd.go starts its own slapd on loopback (StartTLS
# and LDAPS with a throwaway CA) and loads it with slapadd. The system's
# own slapd service is not used (nor started here).
set -euo pipefail
if ! [ -x /usr/sbin/slapd ] || ! command -v ldapsearch >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends slapd ldap-utils
fi
