// baselines_test_util.h — (tests only) small hand-made problems for the baseline tests, built through the
// real validation path (BuildModel), plus checks every algorithm must pass.
//
// Op names are "op000", "op001", ... so canonical op ids equal the order of AddOp calls; devices are
// "dev0", "dev1", ...
//
// Example:
//   ProblemBuilder p;
//   int a = p.AddOp(100), b = p.AddOp(100);
//   p.AddEdge(a, b, 1000);
//   p.AddDevices(2, /*memory_bytes=*/1 << 20);
//   Model model = p.Build();
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_BASELINES_TEST_UTIL_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_BASELINES_TEST_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/partition/partitioner.h"

namespace placement::engine::baselines {

class ProblemBuilder {
 public:
  ProblemBuilder() { SetLink(1'000'000'000, 0); }

  int AddOp(int64_t compute_ns, int64_t output_bytes = 0, int64_t persistent_bytes = 0,
            int64_t temp_bytes = 0) {
    v1::Op* op = request_.mutable_graph()->add_ops();
    char name[16];
    std::snprintf(name, sizeof(name), "op%03d", request_.graph().ops_size() - 1);
    op->set_name(name);
    op->set_compute_ns(compute_ns);
    op->set_output_bytes(output_bytes);
    op->set_persistent_bytes(persistent_bytes);
    op->set_temp_bytes(temp_bytes);
    return request_.graph().ops_size() - 1;
  }
  void AddEdge(int src, int dst, int64_t bytes = 0) {
    v1::Edge* edge = request_.mutable_graph()->add_edges();
    edge->set_src(src);
    edge->set_dst(dst);
    edge->set_bytes(bytes);
  }
  v1::Op* op(int i) { return request_.mutable_graph()->mutable_ops(i); }
  void Colocate(int i, const std::string& group) { op(i)->set_colocation_group(group); }
  void Pin(int i, int device) { op(i)->set_pinned_device(DeviceName(device)); }
  void AllowKind(int i, const std::string& kind) { op(i)->add_allowed_kinds(kind); }

  int AddDevice(int64_t memory_bytes, double speed = 1.0, const std::string& kind = "gpu",
                const std::string& node = "host0") {
    v1::Device* device = request_.mutable_cluster()->add_devices();
    device->set_name(DeviceName(request_.cluster().devices_size() - 1));
    device->set_kind(kind);
    device->set_node(node);
    device->set_memory_bytes(memory_bytes);
    device->set_speed(speed);
    return request_.cluster().devices_size() - 1;
  }
  void AddDevices(int count, int64_t memory_bytes, double speed = 1.0) {
    for (int i = 0; i < count; ++i) AddDevice(memory_bytes, speed);
  }
  // The same link for every pair of devices.
  void SetLink(int64_t bandwidth_bytes_per_second, int64_t latency_ns) {
    for (v1::LinkSpec* spec :
         {request_.mutable_cluster()->mutable_intra_node(), request_.mutable_cluster()->mutable_inter_node()}) {
      spec->set_bandwidth_bytes_per_second(bandwidth_bytes_per_second);
      spec->set_latency_ns(latency_ns);
    }
  }
  // Overrides the link between two devices.
  void SetPairLink(int a, int b, int64_t bandwidth_bytes_per_second, int64_t latency_ns) {
    v1::Link* link = request_.mutable_cluster()->add_links();
    link->set_a(DeviceName(a));
    link->set_b(DeviceName(b));
    link->mutable_spec()->set_bandwidth_bytes_per_second(bandwidth_bytes_per_second);
    link->mutable_spec()->set_latency_ns(latency_ns);
  }
  static std::string DeviceName(int i) { return "dev" + std::to_string(i); }

  v1::PlaceRequest& request() { return request_; }

  Model Build() const {
    absl::StatusOr<Model> model = BuildModel(request_);
    if (!model.ok()) {
      ADD_FAILURE() << model.status();
      std::abort();
    }
    return *std::move(model);
  }

 private:
  v1::PlaceRequest request_;
};

// A chain op0 -> op1 -> op2 on three 1000-byte devices where each op's weights (600 bytes) fill more than
// half a device: a memory-aware algorithm must give every op its own device, (0, 1, 2), even though
// keeping the chain together would otherwise be best.
inline Model ChainOfOpsNeedingADeviceEach() {
  ProblemBuilder p;
  for (int i = 0; i < 3; ++i) p.AddOp(100, 0, /*persistent_bytes=*/600);
  p.AddEdge(0, 1);
  p.AddEdge(1, 2);
  p.AddDevices(3, 1000);
  return p.Build();
}

// Runs `partitioner` without a deadline and returns its assignment (test failure on error).
inline Assignment PlaceWith(const Partitioner& partitioner, const Model& model, uint64_t seed = 0) {
  SolveContext context;
  context.seed = seed;
  absl::StatusOr<PartitionResult> result = partitioner.Partition(model, context);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return Assignment(model.num_ops(), 0);
  EXPECT_EQ(static_cast<int32_t>(result->assignment.size()), model.num_ops());
  return result->assignment;
}

}  // namespace placement::engine::baselines

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_BASELINES_TEST_UTIL_H_
