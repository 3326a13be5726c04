#!/bin/sh
# Installs sglang-matcher where the units look for it, then the units. As root, from a checkout:
#
#   sh deploy/systemd/install.sh [PACKAGE]
#   systemctl enable --now sglang-matcher          # or sglang-matcher-journal
#
# PACKAGE is what pip installs: a wheel, a checkout (default: this one) or `sglang-matcher==V`.
# Result:
#   /opt/sglang-matcher              a venv of its own with the package (its precompiled catalog)
#   /usr/local/bin/sglang-matcher    a link to its command: the path ExecStart= names
#   /etc/systemd/system/sglang-matcher.service, sglang-matcher-journal.service
# Not a venv under /root or /home: the units' ProtectHome= hides those from the service.
# Run again to upgrade (the venv is reused; the units are replaced). Needs python3 with venv
# (Debian: the python3-venv package).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
package=${1:-$here/../..}
prefix=/opt/sglang-matcher

python3 -m venv "$prefix"
"$prefix/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "$package"
mkdir -p /usr/local/bin /etc/systemd/system
ln -sfn "$prefix/bin/sglang-matcher" /usr/local/bin/sglang-matcher
install -m 644 "$here/sglang-matcher.service" "$here/sglang-matcher-journal.service" \
  /etc/systemd/system/
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload
fi
echo "installed $(/usr/local/bin/sglang-matcher --version) in $prefix; units in /etc/systemd/system"
