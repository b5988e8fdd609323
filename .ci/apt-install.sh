#!/usr/bin/env bash
# Installs Debian packages for Coffer's test services (as root, no terminal) without letting their
# own services start: the scripts beside this one run the daemons themselves, on private ports, and
# clamav-freshclam would try to download.
#
#   bash .ci/apt-install.sh [apt-get install options] PACKAGE...
set -euo pipefail
added_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  added_policy=1
fi
trap '[ -z "$added_policy" ] || rm -f /usr/sbin/policy-rc.d' EXIT
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
