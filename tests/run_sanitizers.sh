#!/usr/bin/env bash
# Builds the project with sanitizers and runs the tests under them.
#   bash tests/run_sanitizers.sh asan   # AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   bash tests/run_sanitizers.sh tsan   # ThreadSanitizer (build-tsan/)
# Environment: BUILD_DIR (default build-asan / build-tsan), BUILD_TARGETS (default all; e.g.
# placement_threads_tests = the tests labelled `unit_threads` or `e2e`), CTEST_ARGS (extra ctest
# arguments, e.g. CTEST_ARGS="-L unit"; with BUILD_TARGETS, select only what was built, e.g.
# "-L unit_threads|e2e").
# The asan build uses clang with the libFuzzer targets enabled, configured exactly as tests/run_fuzz.sh
# configures it, so the two scripts share build-asan/ and CI compiles the project once for both.
# The tsan build (gcc) links tests/tsan/absl_mutex_annotations.cc into every binary: Debian's Abseil
# is not built with TSan, and without it TSan cannot see absl::Mutex (tests/tsan/README.md).
# Optimised at -O1 with line tables only (see CMakeLists.txt): fast enough to build on 2 cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="${1:-asan}"
case "$mode" in
  asan) build_dir="${BUILD_DIR:-build-asan}"
        export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" ;;
  tsan) build_dir="${BUILD_DIR:-build-tsan}"
        export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp" ;;
  *) echo "usage: $0 asan|tsan" >&2; exit 2 ;;
esac
bash deploy/install_build_deps.sh
bash tests/sanitizer_cmake.sh "$mode" "$build_dir"
# shellcheck disable=SC2086
cmake --build "$build_dir" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
# shellcheck disable=SC2086
ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 1200 ${CTEST_ARGS:-}
