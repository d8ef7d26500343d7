#!/usr/bin/env bash
# Soak: a Release placement_server on loopback under a mix of cache hits, misses, submit+cancel and
# invalid requests from 8 callers of 4 tenants (bearer tokens; each tenant may have one job on a worker
# at a time) for a fixed time (default 5 minutes); fails on any unexpected answer, on a tenant that got
# no answer, or when the server's RSS grows past its cache bounds plus 64 MiB. Figures go in
# bench/README.md.
#   bash tests/load/run_soak.sh            # 300 s, binaries from build/
#   BUILD_DIR=/tmp/b bash tests/load/run_soak.sh 600
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds="${1:-300}"
build_dir="${BUILD_DIR:-build}"
cache_bytes=$((64 << 20))
repeat_index_bytes=$((16 << 20))

log="$(mktemp)"
tokens="$(mktemp)"
for tenant in a b c d; do
  echo "soak-token-$tenant-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ') team-$tenant" >>"$tokens"
done
"$build_dir/service/server/placement_server" --host=127.0.0.1 --port=0 --metrics_port=0 --workers=2 \
  --insecure --auth_tokens="$tokens" --tenant_max_running=1 \
  --cache_bytes=$cache_bytes --repeat_index_bytes=$repeat_index_bytes --log_requests=false 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log" "$tokens"' EXIT
for _ in $(seq 1 600); do
  grep -q "metrics on" "$log" && break
  sleep 0.1
done
port="$(grep -o 'listening on [^ ]*' "$log" | sed 's/.*://')"
metrics_port="$(grep -o 'metrics on [^ ]*' "$log" | sed 's/.*://')"
echo "soak: server pid $server on 127.0.0.1:$port (metrics :$metrics_port) for ${seconds}s"
status=0
"$build_dir/client/placement_load" --server="127.0.0.1:$port" --metrics="127.0.0.1:$metrics_port" \
  --duration="${seconds}s" --requests=10000000 --concurrency=8 --ops=1000 --hot_graphs=16 \
  --miss_fraction=0.05 --cancel_fraction=0.05 --bad_fraction=0.05 --algorithm=pardnn --time_limit=1s \
  --tokens="$tokens" \
  --max_rss_growth=$((cache_bytes + repeat_index_bytes + (64 << 20))) || status=$?
curl -s "127.0.0.1:$metrics_port/metrics" 2>/dev/null |
  grep -E '^placement_(solves_total|cache_lookups_total|admission_rejections_total)' || true
kill -TERM $server
wait $server || true
exit $status
