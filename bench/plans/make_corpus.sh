#!/usr/bin/env bash
# Writes the training-plan corpus of placement_plans_bench: real PyTorch training steps (transformers of
# several depths, CNNs, an unrolled LSTM) exported with placement.torch_export, each as NAME.batch.pb (the
# whole batch, one microbatch) and NAME.mb16.pb / NAME.mb64.pb (one microbatch of batch / M, the update
# once per step), on 4 accelerators of one host. Nothing is committed: the files go to OUT_DIR.
#
#   bench/plans/make_corpus.sh BUILD_DIR OUT_DIR      # needs Debian's python3-torch and python3-torchvision
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
out="${2:-$build/plans_corpus}"
mkdir -p "$out"
python=/usr/bin/python3
export PYTHONPATH="$PWD/client/python:$PWD/$build/client/python/generated:$PWD/bench/plans"
export_step() {  # NAME BATCH ARGS...
  local name="$1" batch="$2"
  shift 2
  for m in 1 16 64; do
    local file="$out/$name.mb$m.pb" extra=(--microbatches="$m")
    if [[ $m == 1 ]]; then
      file="$out/$name.batch.pb"
      extra=()
    fi
    [[ -s "$file" ]] && continue
    "$python" -m placement.torch_export --batch="$batch" --devices=4 --out="$file" "${extra[@]}" "$@" >&2
  done
}
export_step gpt6 64 --model=transformer --layers=6 --d_model=256 --heads=8 --seq=64 --optimizer=adam
export_step gpt12 64 --model=transformer --layers=12 --d_model=256 --heads=8 --seq=64 --optimizer=adam
export_step gpt24 64 --model=transformer --layers=24 --d_model=192 --heads=6 --seq=64 --optimizer=adam
export_step wide8 64 --model=transformer --layers=8 --d_model=512 --heads=8 --seq=64 --optimizer=adam
export_step resnet18 64 --model=torchvision:resnet18 --image_size=64 --optimizer=sgd
export_step mobilenet_v2 64 --model=torchvision:mobilenet_v2 --image_size=64 --optimizer=sgd
export_step vgg11 64 --model=torchvision:vgg11 --image_size=64 --optimizer=sgd
export_step lstm 64 --model=lstm_model:lstm --optimizer=adam
echo "corpus in $out" >&2
