#!/usr/bin/env bash
# Configures a sanitizer build; shared by tests/run_sanitizers.sh and tests/run_fuzz.sh so that both
# configure build-asan/ identically (one compilation serves the ASan+UBSan test run and the fuzz smoke).
#   bash tests/sanitizer_cmake.sh asan BUILD_DIR   # clang, ASan+UBSan, tests + libFuzzer targets
#   bash tests/sanitizer_cmake.sh tsan BUILD_DIR   # gcc, TSan, tests (+ tests/tsan annotations)
# Installs clang and its sanitizer/libFuzzer runtimes (not in deploy/debian-packages.txt: only these
# builds need them) when missing. Benchmarks are off in both.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode="$1"
build_dir="$2"
if [ "$mode" = asan ]; then
  bash deploy/apt_install.sh clang libclang-rt-14-dev
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPLACEMENT_FUZZ=ON \
    -DPLACEMENT_SANITIZE=address,undefined -DPLACEMENT_BUILD_TESTS=ON -DPLACEMENT_BUILD_BENCHMARKS=OFF \
    >/dev/null
elif [ "$mode" = tsan ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1" \
    -DPLACEMENT_SANITIZE=thread -DPLACEMENT_BUILD_TESTS=ON -DPLACEMENT_BUILD_BENCHMARKS=OFF >/dev/null
else
  echo "usage: $0 asan|tsan BUILD_DIR" >&2
  exit 2
fi
