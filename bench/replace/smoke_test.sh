#!/usr/bin/env bash
# Smoke test of replace_bench (ctest replace_bench_smoke): the repository's real BERT-L3 training step at
# 4 devices, the first device leaving and the fourth joining; the table has both rows, every ratio is a
# number, and --dump_dir writes the case so that placement_offline replays the re-placement.
#   bash bench/replace/smoke_test.sh build/bench/replace/replace_bench build/service/offline/placement_offline .
set -euo pipefail
bench=$1 offline=$2 source=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/dump"
cp "$source/tests/data/requests/bert_l3_training.json.gz" "$work/corpus/"
"$bench" --corpus="$work/corpus" --devices=4 --remove=0 --move_weight=1e-3 --time_limit_s=20 \
  --dump_dir="$work/dump" --out="$work/table.md" 2> "$work/log"
rows=$(grep -cE '^\| bert_l3_training \| [-+][a-z]+[0-9]+ \| [0-9.]+( %)? \| [0-9.]+ \| [0-9.]+ \|' "$work/table.md")
if [ "$rows" != 2 ]; then
  echo "expected a removal and an addition row, got $rows:"; cat "$work/table.md" "$work/log"; exit 1
fi
stem=$(ls "$work/dump" | sed -n 's/\.after\.request\.json$//p')
for part in before.request after.request before.placement fresh.placement replaced.placement; do
  test -s "$work/dump/$stem.$part.json" || { echo "missing $stem.$part.json"; exit 1; }
done
# The dumped request carries the previous placement: placing it again is the same re-placement.
"$offline" place --request="$work/dump/$stem.after.request.json" --format=json > "$work/replayed.json"
python3 - "$work/replayed.json" "$work/dump/$stem.replaced.placement.json" <<'PY'
import json, sys
replayed, replaced = (json.load(open(p)) for p in sys.argv[1:])
replayed = replayed.get("placement", replayed)
assert replayed["metrics"]["makespan_ns"] == replaced["metrics"]["makespan_ns"], (replayed["metrics"], replaced["metrics"])
assert replayed["metrics"].get("bytes_moved") == replaced["metrics"].get("bytes_moved")
print("replayed:", replayed["metrics"]["makespan_ns"], "ns,", replayed["metrics"].get("bytes_moved"), "bytes moved")
PY
echo "replace_bench smoke: ok"
