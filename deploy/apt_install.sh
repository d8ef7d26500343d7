#!/usr/bin/env bash
# Installs whichever of the named Debian packages are missing, as root or via sudo.
#   bash deploy/apt_install.sh PACKAGE...
# The package lists are refreshed before every try (a machine whose lists were never fetched, or are
# stale, cannot locate a package otherwise), and a failed update or install is tried again up to three
# times with a pause, so that one bad moment of a mirror does not fail a whole build.
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3; do
  if $sudo apt-get update -q -o Acquire::Retries=3 >/dev/null &&
     $sudo apt-get install -y -q -o Acquire::Retries=3 --no-install-recommends "${missing[@]}" >/dev/null; then
    exit 0
  fi
  if [ "$attempt" -lt 3 ]; then
    echo "apt-get failed (try $attempt of 3); trying again in $((attempt * 15)) s" >&2
    sleep $((attempt * 15))
  fi
done
echo "could not install: ${missing[*]}" >&2
exit 1
