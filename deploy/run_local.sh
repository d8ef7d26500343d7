#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs the build dependencies, builds the server and the
# client (Release), starts placement_server on its defaults but plaintext on loopback (--insecure; another
# free port if 50051 or 9464 is taken), places a bundled real graph (BERT-3 training, 600 ops, from the msr NeurIPS'20 inputs) through
# placementctl, asks again to show the cache, asks for the same step as a training plan of 8 microbatches
# (api.md §2.1: what pipelining gains on the same devices), and stops the server with SIGTERM. placementctl prints its
# short summary (--format=summary); the build's output goes to a log that is shown only when it fails,
# so the whole run prints a screenful (at most 40 lines).
#   bash deploy/run_local.sh [REQUEST_FILE]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build_dir="${BUILD_DIR:-build}"
request="${1:-tests/data/requests/bert_l3_training.json.gz}"

bash deploy/install_build_deps.sh --build-only
mkdir -p "$build_dir"
build_log="$build_dir/run_local_build.log"
echo "== building placement_server and placementctl (Release; output in $build_log)"
if ! { cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build_dir" --target placement_server placementctl; } >"$build_log" 2>&1; then
  tail -n 30 "$build_log" >&2
  echo "build failed: the whole output is in $build_log" >&2
  exit 1
fi

server="$build_dir/service/server/placement_server"
ctl="$build_dir/client/placementctl"
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# Plaintext on purpose: a local demo on loopback (the server refuses plaintext without --insecure).
flags=(--insecure --host=127.0.0.1)
in_use 50051 && flags+=(--port=0)
in_use 9464 && flags+=(--metrics_port=0)

log="$(mktemp)"
"$server" "${flags[@]}" 2>"$log" &
server_pid=$!
trap 'kill -TERM $server_pid 2>/dev/null || true; wait $server_pid 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 200); do
  grep -q "listening on" "$log" && break
  kill -0 $server_pid 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
done
address="$(grep -o 'listening on [^ ]*' "$log" | head -1 | awk '{print $3}')"
port="${address##*:}"
target="127.0.0.1:$port"
echo "== placement_server $(grep -o 'listening on [^ ]*' "$log" | head -1), $(grep -o 'metrics on [^ ]*' "$log" | head -1)"
echo "== placementctl health"
"$ctl" --server="$target" health
echo "== placementctl place --request=$request --format=summary"
"$ctl" --server="$target" place --request="$request" --progress=never --format=summary
echo "== the same request again (a cache hit):"
"$ctl" --server="$target" place --request="$request" --progress=never --format=summary | grep '^cache'
echo "== the same step as a training plan: 8 microbatches, the server picks the window (--microbatches=8)"
"$ctl" --server="$target" place --request="$request" --microbatches=8 --progress=never --format=summary |
  grep -E '^(step|plan|one device|algorithm) '
echo "(placementctl shows this summary on a terminal; piped or with --format=json it prints JSON)"
echo "== server log:"
cat "$log"
