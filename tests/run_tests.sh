#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds everything (Release, -O2) and runs the whole test suite.
#   bash tests/run_tests.sh            # what CI runs (.ci/run)
# Environment: BUILD_DIR (default build), CTEST_ARGS (extra ctest arguments, e.g. "-L unit").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"
bash deploy/install_build_deps.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir"
# shellcheck disable=SC2086
ctest --test-dir "$build_dir" --output-on-failure -j2 ${CTEST_ARGS:-}
