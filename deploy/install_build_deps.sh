#!/usr/bin/env bash
# Installs the Debian 12 packages listed in debian-packages.txt (only those missing), as root or via sudo.
#   bash deploy/install_build_deps.sh               # everything: build and test
#   bash deploy/install_build_deps.sh --build-only  # up to the list's "test-only" marker (no test tools)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
list="$(cat "$here/debian-packages.txt")"
if [ "${1:-}" = "--build-only" ]; then
  list="$(sed '/^# test-only/,$d' <<<"$list")"
fi
mapfile -t packages < <(grep -v '^\s*#' <<<"$list" | sed '/^\s*$/d')
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "build dependencies: all ${#packages[@]} Debian packages present"
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "build dependencies installed"
