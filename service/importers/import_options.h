// import_options.h — the knobs every importer shares, the default cluster, and the cluster-file reader.
//
// Every importer (msr, pipedream, onnx, chakra, wfcommons, pardnn) turns someone else's graph into a
// `v1::PlaceRequest`. What the source file does not say (the devices, how fast an op runs on them, how a
// forward-only graph becomes a training step) comes from `ImportOptions`, whose defaults are documented
// here.
//
// Example:
//   ImportOptions options;
//   options.cluster = *ReadClusterFile("cluster.json");   // else DefaultCluster() or the source's own
//   options.training.enabled = true;                      // pipedream / onnx: add backward + update ops
//   absl::StatusOr<v1::PlaceRequest> request = ImportPipeDream("resnet50/graph.txt", options);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_OPTIONS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/cluster.pb.h"

namespace placement::importers {

// A roofline device model for sources that carry shapes but no times (onnx, chakra without Kineto):
//   time(op) = launch_overhead_ns + max(flops / peak_flops_per_second, bytes / memory_bytes_per_second).
// Defaults describe one NVIDIA V100 (FP32): 15.7 TFLOP/s, 900 GB/s HBM2, 5 µs per kernel launch.
struct RooflineModel {
  double peak_flops_per_second = 15.7e12;
  double memory_bytes_per_second = 900e9;
  int64_t launch_overhead_ns = 5'000;
};

// How a forward-only layer graph (pipedream, onnx) becomes one training step. For each layer L:
//   L              forward op (profiled / roofline time), holds L's parameters (persistent_bytes);
//   L/backward     backward op: profiled time (pipedream) or backward_flops_factor x forward (onnx); it
//                  reads the gradients of L's consumers (reversed edges) and the activations L's forward
//                  read and wrote (so they stay live until the backward op has run);
//   L/update       weight update for layers with parameters: reads the weight gradient, holds the optimizer
//                  state (optimizer_state_copies x parameter bytes); memory-bound time;
//   L, L/backward and L/update share the colocation group "L/params": parameters are not copied around.
struct TrainingOptions {
  bool enabled = true;
  // onnx only: backward FLOPs of conv / matmul layers relative to forward (data + weight gradients).
  double backward_flops_factor = 2.0;
  // Optimizer state per parameter byte: 0 = plain SGD, 1 = SGD with momentum (default), 2 = Adam.
  int optimizer_state_copies = 1;
};

struct ImportOptions {
  // Devices of the request. Unset = the source's own (msr: maxFPGAs devices of maxSizePerFPGA bytes) or
  // DefaultCluster().
  std::optional<v1::Cluster> cluster;
  TrainingOptions training;
  RooflineModel roofline;
  // onnx: batch size to set on the model's data inputs before shape inference; 0 = keep the model's.
  int64_t onnx_batch_size = 0;
  // chakra: matching Kineto (Chrome trace) file for GPU kernel times; empty = roofline estimates.
  std::string kineto_path;
  // chakra: which ProfilerStep#N to import when the trace holds several; -1 = the first non-empty one.
  int chakra_step = -1;
  // msr: also count each node's output tensor (its largest out-edge `size`) as output_bytes. Off by
  // default because msr's own memory model charges only the node `size` (taken as persistent_bytes).
  bool msr_count_activations = false;
};

// The cluster used when neither --cluster nor the source says otherwise: 4 GPUs ("gpu0".."gpu3", kind
// "gpu") of 16 GiB and speed 1.0 on one node "node0"; intra-node 100 GB/s with 2 µs latency, inter-node
// 12.5 GB/s with 10 µs.
v1::Cluster DefaultCluster();

// A host CPU device ("cpu0", kind "cpu", 64 GiB, speed 1.0, node "node0") for sources that force some ops
// onto the CPU (pardnn's CPU-only ops) when the default cluster is used.
v1::Device DefaultCpuDevice();

// Reads a JSON (or .pb / .json.gz) `v1::Cluster` file.
absl::StatusOr<v1::Cluster> ReadClusterFile(absl::string_view path);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_IMPORT_OPTIONS_H_
