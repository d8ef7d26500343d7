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
count=${#packages[@]}
bash "$here/apt_install.sh" "${packages[@]}"
echo "build dependencies: all $count Debian packages present"
