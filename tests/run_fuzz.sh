#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan+UBSan) and runs each for a fixed time; any
# finding (crash, sanitizer report, timeout, out-of-memory) fails the run.
#   bash tests/run_fuzz.sh            # 60 s per target
#   bash tests/run_fuzz.sh 600        # 10 min per target
# Environment: BUILD_DIR (default build-asan, shared with tests/run_sanitizers.sh asan), FUZZ_JOBS
#   (targets run at once, default 2), FUZZ_SEED (libFuzzer's -seed: a fixed one makes a run from an
#   empty corpus repeat the same inputs, which CI uses; default random),
#   FUZZ_TARGETS (space-separated subset, default all). Seeds are derived at run time from tests/data and,
#   when present, ../shared/workloads (PLACEMENT_WORKLOADS overrides); corpora and findings stay under
#   BUILD_DIR/fuzz/ (a later run starts from the corpus an earlier run grew).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds="${1:-60}"
build_dir="${BUILD_DIR:-build-asan}"
jobs="${FUZZ_JOBS:-2}"
workloads="${PLACEMENT_WORKLOADS:-../shared/workloads}"

bash deploy/install_build_deps.sh
all_targets="place_request_fuzzer text_inputs_fuzzer importer_msr_fuzzer importer_pipedream_fuzzer
  importer_onnx_fuzzer importer_chakra_fuzzer importer_wfcommons_fuzzer importer_pardnn_fuzzer"
# shellcheck disable=SC2206
targets=(${FUZZ_TARGETS:-$all_targets})

# The same configuration as `tests/run_sanitizers.sh asan` (clang, ASan+UBSan, tests too): with the
# same BUILD_DIR the second script reuses every object the first compiled.
bash tests/sanitizer_cmake.sh asan "$build_dir"
cmake --build "$build_dir" --target "${targets[@]}" fuzz_seed_tool

# ---- Seeds (re-derived every run; small files only) ----
fuzz_dir="$build_dir/fuzz"
seeds="$fuzz_dir/seeds"
rm -rf "$seeds"
mkdir -p "$seeds" "$fuzz_dir/artifacts"
# seed NAME FILE...: copies each file (gunzipped) below 256 KiB into NAME's seed folder.
seed() {
  local name="$1"; shift
  mkdir -p "$seeds/$name"
  local f n=0
  for f in "$@"; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    gzip -dcf "$f" 2>/dev/null | head -c 262144 > "$seeds/$name/$(basename "$f" .gz).$n" || true
  done
}
shopt -s nullglob globstar
have_workloads=0; [ -d "$workloads" ] && have_workloads=1
ws() { [ "$have_workloads" -eq 1 ] && printf '%s\n' "$@" || true; }
mkdir -p "$seeds/place_request_fuzzer"
"$build_dir/tests/fuzz/fuzz_seed_tool" "$seeds/place_request_fuzzer" \
  tests/data/service/small_request.json tests/data/offline/three_ops.json >/dev/null
seed importer_msr_fuzzer tests/data/importers/msr/* \
  $(ws "$workloads"/msr_dnn_partitioning/**/*.json | head -20)
seed importer_pipedream_fuzzer tests/data/importers/pipedream/* \
  $(ws "$workloads"/pipedream_profiles/**/graph.txt | head -10)
seed importer_onnx_fuzzer tests/data/importers/onnx/*.onnx $(ws "$workloads"/onnx_light_models/*.onnx)
seed importer_chakra_fuzzer tests/data/importers/chakra/resnet_et_*.json.gz
seed importer_wfcommons_fuzzer $(ws "$workloads"/wfcommons/*.json.gz)
seed importer_pardnn_fuzzer tests/data/importers/pardnn/*/*.dot
# text_inputs_fuzzer: the first byte picks the parser (see text_inputs_fuzzer.cc).
mkdir -p "$seeds/text_inputs_fuzzer"
t="$seeds/text_inputs_fuzzer"
{ printf '\x00'; cat tests/data/offline/three_ops.json; } > "$t/json"
{ printf '\x01'; gzip -c tests/data/offline/three_ops.json; } > "$t/json_gz"
printf '\x0210m' > "$t/duration1"; printf '\x021h2m3.5s' > "$t/duration2"; printf '\x02inf' > "$t/duration3"
printf '\x0350051' > "$t/int"; printf '\x04268435456' > "$t/int64"; printf '\x050.25' > "$t/double"
printf '\x06true' > "$t/bool"; printf '\x07200000 100000\n' > "$t/cpu_max"; printf '\x07max 100000\n' > "$t/cpu_max2"
if [ "$have_workloads" -eq 0 ]; then
  echo "fuzz: $workloads absent; seeds from tests/data only"
fi

# ---- Run, $jobs at a time ----
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_one() {
  local name="$1"
  local corpus="$fuzz_dir/corpus/$name"
  mkdir -p "$corpus" "$fuzz_dir/scratch/$name"
  # -timeout: one input may take this long; -rss_limit_mb: memory per process; both are findings.
  if TMPDIR="$fuzz_dir/scratch/$name" "$build_dir/tests/fuzz/$name" "$corpus" "$seeds/$name" \
      -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2560 -max_len=262144 \
      ${FUZZ_SEED:+-seed="$FUZZ_SEED"} \
      -print_final_stats=1 -artifact_prefix="$fuzz_dir/artifacts/$name-" \
      >"$fuzz_dir/$name.log" 2>&1; then
    echo "fuzz $name: ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$fuzz_dir/$name.log" | grep -o '[0-9]*$') runs in ${seconds}s, corpus $(ls "$corpus" | wc -l)"
  else
    echo "fuzz $name: FAILED (log $fuzz_dir/$name.log; input in $fuzz_dir/artifacts/)"
    tail -n 40 "$fuzz_dir/$name.log"
    return 1
  fi
}
status=0
pids=()
for name in "${targets[@]}"; do
  run_one "$name" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
rm -rf "$fuzz_dir/scratch"
exit $status
