#!/usr/bin/env bash
# Smoke test of placement_compare_bench (ctest compare_bench_smoke): the repository's real BERT-L3
# training step at 2 devices with 0.55 and 0.6 of its one-device peak each, three quick algorithms and
# their `+mem` columns; every --jsonl row carries its overflow bytes, 0 exactly where the answer fits,
# and some answers overflow (so the field is seen non-zero).
#   bash bench/compare/smoke_test.sh build/bench/compare/placement_compare_bench .
set -euo pipefail
bench=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus"
cp "$source/tests/data/requests/bert_l3_training.json.gz" "$work/corpus/"
"$bench" --corpus="$work/corpus" --devices=2 --memory=peak:0.55,peak:0.6 \
  --algorithms=round_robin,m_etf,single_device --time_limit_s=20 --out="$work/table.md" \
  --jsonl="$work/rows.jsonl" > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
python3 - "$work/rows.jsonl" <<'PY'
import json, sys
cases = [json.loads(line) for line in open(sys.argv[1])]
assert len(cases) == 2, cases
rows = [row for case in cases for row in case["rows"]]
assert len(rows) == 12, rows  # three algorithms and their +mem columns, two memories
for row in rows:
    assert not row["error"], row
    assert (row["overflow_bytes"] == 0) == row["feasible"], row
overflowing = sum(row["overflow_bytes"] > 0 for row in rows)
assert overflowing > 0, rows
print(f"compare_bench smoke: ok ({overflowing} of {len(rows)} answers overflow)")
PY
