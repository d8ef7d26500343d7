// `placement_offline convert` (importers) and the flags only it uses.
//
//   placement_offline convert --from=msr|pipedream|onnx|chakra|wfcommons|pardnn --in=PATH
//                             [--cluster=CLUSTER.json] --out=REQUEST.json[.gz]|REQUEST.pb
//
// The request is validated with the service's own model builder before it is written, so a file that
// converts is a file the service accepts. A one-line summary goes to stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "service/importers/chakra_importer.h"
#include "service/importers/import_options.h"
#include "service/importers/importers.h"
#include "service/engine/io/message_io.h"
#include "service/engine/model/model_builder.h"
#include "service/offline/offline_commands.h"

ABSL_FLAG(bool, training, true,
          "convert: pipedream / onnx: expand the forward layers into a training step (backward op per "
          "layer, weight update colocated with the parameters)");
ABSL_FLAG(int64_t, onnx_batch_size, 0,
          "convert --from=onnx: batch size set on the data inputs before shape inference (0 = the "
          "model's)");
ABSL_FLAG(double, peak_tflops, 15.7,
          "convert: roofline peak in TFLOP/s for sources without times (onnx, chakra without Kineto)");
ABSL_FLAG(double, memory_gbps, 900, "convert: roofline memory bandwidth in GB/s");
ABSL_FLAG(double, launch_overhead_us, 5, "convert: roofline per-op launch overhead in µs");
ABSL_FLAG(double, backward_flops_factor, 2.0,
          "convert --from=onnx: backward FLOPs of Conv / Gemm / MatMul relative to forward");
ABSL_FLAG(int32_t, optimizer_state_copies, 1,
          "convert: optimizer state per parameter byte (0 SGD, 1 momentum, 2 Adam)");
ABSL_FLAG(std::string, kineto, "",
          "convert --from=chakra: the matching Kineto trace (GPU kernel times)");
ABSL_FLAG(int32_t, chakra_step, -1,
          "convert --from=chakra: ProfilerStep#N to import (-1 = the first non-empty one)");
ABSL_FLAG(bool, msr_count_activations, false,
          "convert --from=msr: also count each node's largest out-edge size as its output bytes");

namespace placement::offline {
namespace {

int Usage(const std::string& message) {
  std::fprintf(stderr, "convert: %s\nusage: placement_offline convert --from=%s --in=PATH "
                       "[--cluster=FILE] --out=FILE\n",
               message.c_str(), absl::StrJoin(importers::ImportFormats(), "|").c_str());
  return 2;
}

}  // namespace

int RunConvert(const std::vector<std::string>& args) {
  namespace imp = importers;
  if (!args.empty()) return Usage("unexpected argument '" + args[0] + "'");
  const std::string from = absl::GetFlag(FLAGS_from);
  const std::string in = absl::GetFlag(FLAGS_in);
  std::string out = absl::GetFlag(FLAGS_out);
  if (from.empty()) return Usage("--from is required");
  if (in.empty()) return Usage("--in is required");
  if (out.empty()) out = "-";
  bool known = false;
  for (const std::string& format : imp::ImportFormats()) known |= format == from;
  if (!known) return Usage("unknown format '" + from + "'");

  imp::ImportOptions options;
  if (const std::string cluster = absl::GetFlag(FLAGS_cluster); !cluster.empty()) {
    absl::StatusOr<v1::Cluster> parsed = imp::ReadClusterFile(cluster);
    if (!parsed.ok()) return Fail(parsed.status());
    options.cluster = std::move(*parsed);
  }
  options.training.enabled = absl::GetFlag(FLAGS_training);
  options.training.backward_flops_factor = absl::GetFlag(FLAGS_backward_flops_factor);
  options.training.optimizer_state_copies = absl::GetFlag(FLAGS_optimizer_state_copies);
  options.roofline.peak_flops_per_second = absl::GetFlag(FLAGS_peak_tflops) * 1e12;
  options.roofline.memory_bytes_per_second = absl::GetFlag(FLAGS_memory_gbps) * 1e9;
  options.roofline.launch_overhead_ns =
      static_cast<int64_t>(absl::GetFlag(FLAGS_launch_overhead_us) * 1e3 + 0.5);
  options.onnx_batch_size = absl::GetFlag(FLAGS_onnx_batch_size);
  options.kineto_path = absl::GetFlag(FLAGS_kineto);
  options.chakra_step = absl::GetFlag(FLAGS_chakra_step);
  options.msr_count_activations = absl::GetFlag(FLAGS_msr_count_activations);
  if (options.roofline.peak_flops_per_second <= 0 || options.roofline.memory_bytes_per_second <= 0 ||
      options.roofline.launch_overhead_ns < 0 || options.training.optimizer_state_copies < 0 ||
      options.training.backward_flops_factor < 0 || options.onnx_batch_size < 0) {
    return Usage("roofline and training flags must be positive");
  }
  if (!options.kineto_path.empty() && from != "chakra") return Usage("--kineto needs --from=chakra");

  absl::StatusOr<v1::PlaceRequest> request;
  imp::ChakraImportStats chakra;
  if (from == "chakra") {
    request = imp::ImportChakra(in, options, &chakra);
  } else {
    request = imp::Import(from, in, options);
  }
  if (!request.ok()) return Fail(request.status());

  std::vector<engine::FieldViolation> violations;
  absl::StatusOr<engine::Model> model = engine::BuildModel(*request, &violations);
  if (!model.ok()) {
    std::fprintf(stderr, "convert: the imported request is not valid (importer bug or unusable input):\n");
    return Fail(model.status());
  }
  if (absl::Status written = engine::WriteMessageFile(*request, out); !written.ok()) {
    return Fail(written);
  }
  std::fprintf(stderr, "converted %s %s: %d ops, %d edges, %d devices -> %s", from.c_str(), in.c_str(),
               request->graph().ops_size(), request->graph().edges_size(),
               request->cluster().devices_size(), out == "-" ? "stdout" : out.c_str());
  if (from == "chakra" && !options.kineto_path.empty()) {
    std::fprintf(stderr, " (Kineto times for %lld ops, %lld iterations matched)",
                 static_cast<long long>(chakra.ops_with_kineto_time),
                 static_cast<long long>(chakra.kineto_iterations_matched));
  }
  std::fprintf(stderr, "\n");
  return 0;
}

}  // namespace placement::offline
