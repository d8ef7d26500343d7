// fuzz_seed_tool — writes the seed corpus of place_request_fuzzer: every request file given on the
// command line (JSON, JSON.gz or binary; see message_io.h) re-encoded as binary protobuf, the form the
// server receives, plus small random requests from the test generator (with constraints, so that the
// fuzzer starts from inputs that pass validation). Files whose encoding exceeds --max_bytes are skipped
// (large inputs make every fuzzing run slow without reaching new code).
//
//   fuzz_seed_tool OUT_DIR [REQUEST_FILE...]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/io/message_io.h"
#include "tests/testutil/random_graph.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seed_tool OUT_DIR [REQUEST_FILE...]\n");
    return 64;
  }
  constexpr size_t kMaxBytes = 256 << 10;
  const std::string out = argv[1];
  int written = 0;
  auto write = [&](const placement::v1::PlaceRequest& request, const std::string& name) {
    std::string bytes;
    if (!request.SerializeToString(&bytes) || bytes.size() > kMaxBytes) return;
    if (placement::engine::WriteFileBytes(absl::StrCat(out, "/", name, ".pb"), bytes).ok()) ++written;
  };
  for (int i = 2; i < argc; ++i) {
    absl::StatusOr<placement::v1::PlaceRequest> request =
        placement::engine::ReadMessageFile<placement::v1::PlaceRequest>(argv[i]);
    if (request.ok()) write(*request, absl::StrCat("file", i));
  }
  for (int seed = 0; seed < 24; ++seed) {
    placement::testutil::RandomGraphOptions options;
    options.num_ops = 3 + seed * 7;
    options.avg_out_degree = 1.5 + seed % 3;
    options.num_devices = 1 + seed % 5;
    options.num_nodes = 1 + seed % 2;
    options.seed = seed;
    options.colocation_fraction = seed % 2 == 0 ? 0.2 : 0.0;
    options.pinned_fraction = seed % 3 == 0 ? 0.1 : 0.0;
    options.control_edge_fraction = 0.1;
    options.parallel_edge_fraction = 0.05;
    if (seed % 4 == 1) {
      options.device_kinds = {"gpu", "cpu"};
      options.kind_restricted_fraction = 0.2;
    }
    placement::v1::PlaceRequest request = placement::testutil::RandomLayeredRequest(options);
    write(request, absl::StrCat("random", seed));
    // The same graph as a training plan (api.md §2.1): microbatches, a window, replicas, and the sinks
    // once per step (an update closes the step, so the request stays valid).
    placement::v1::PlacementOptions* plan = request.mutable_options();
    plan->set_microbatches(2 + seed % 5);
    plan->set_max_in_flight(seed % 3);
    if (seed % 4 == 2 && options.num_devices % 2 == 0 && options.pinned_fraction == 0.0 &&
        options.kind_restricted_fraction == 0.0) {
      plan->set_data_parallel(2);
    }
    std::vector<bool> has_consumer(request.graph().ops_size(), false);
    for (const placement::v1::Edge& edge : request.graph().edges()) has_consumer[edge.src()] = true;
    for (int op = 0; op < request.graph().ops_size(); ++op) {
      if (!has_consumer[op] && op % 2 == 0) request.mutable_graph()->mutable_ops(op)->set_once_per_step(true);
    }
    write(request, absl::StrCat("plan", seed));
  }
  std::printf("%d seeds in %s\n", written, out.c_str());
  return written > 0 ? 0 : 1;
}
