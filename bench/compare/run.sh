#!/usr/bin/env bash
# Runs `compare` over the whole corpus and writes bench/results.md (see README.md in this folder).
#
#   bench/compare/run.sh [BUILD_DIR] [extra placement_compare_bench flags...]
#
# BUILD_DIR defaults to ./build. The corpus is built on first use under BUILD_DIR/corpus:
#   placement_corpus convert-all   every workload of ../shared/workloads (skipped when absent)
#   placement_corpus generate      the scaled graphs (bert/rnn at 100k and 1M ops)
# Set SKIP_1M=1 to leave the million-op graphs out (they dominate the run time).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
shift || true
corpus_tool="$build/bench/corpus/placement_corpus"
bench_tool="$build/bench/compare/placement_compare_bench"
for tool in "$corpus_tool" "$bench_tool"; do
  if [[ ! -x "$tool" ]]; then
    echo "missing $tool: ninja -C $build placement_corpus placement_compare_bench" >&2
    exit 1
  fi
done
corpus="$build/corpus"
if [[ ! -d "$corpus/workloads" ]]; then
  "$corpus_tool" convert-all --out_dir="$corpus/workloads" >&2
fi
if [[ ! -d "$corpus/scaled" ]]; then
  "$corpus_tool" generate --out_dir="$corpus/scaled" >&2
fi
max_ops=()
if [[ "${SKIP_1M:-0}" == "1" ]]; then
  max_ops=(--max_ops=200000)
fi
"$bench_tool" --corpus="$corpus" --devices=2,4,8 --memory=source,tight \
  --out=bench/results.md --jsonl="$build/compare_rows.jsonl" \
  --command_line="bench/compare/run.sh${SKIP_1M:+ (SKIP_1M=$SKIP_1M)}" "${max_ops[@]}" "$@"
echo "wrote bench/results.md" >&2
