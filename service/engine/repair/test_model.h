// test_model.h — (tests only) builds small Models by hand through the real validation path
// (BuildModel), so tests of repair and pardnn state their graphs in a few lines.
//
// Op names are "op0000", "op0001", ... so canonical op ids equal the order of AddOp calls.
//
// Example:
//   TestModel t;
//   int a = t.AddOp(100), b = t.AddOp(200);
//   t.AddEdge(a, b, 1 << 20);
//   t.AddDevices(2, /*memory_bytes=*/1 << 30);
//   t.SetLink(/*bandwidth=*/1'000'000'000, /*latency_ns=*/1000);
//   Model model = t.Build();
#ifndef PLACEMENT_SERVICE_ENGINE_REPAIR_TEST_MODEL_H_
#define PLACEMENT_SERVICE_ENGINE_REPAIR_TEST_MODEL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "placement/v1/cluster.pb.h"
#include "placement/v1/graph.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"

namespace placement::engine {

class TestModel {
 public:
  TestModel() { SetLink(1'000'000'000, 0); }

  int AddOp(int64_t compute_ns, int64_t output_bytes = 0, int64_t persistent_bytes = 0,
            int64_t temp_bytes = 0) {
    v1::Op* op = graph_.add_ops();
    char name[32];
    std::snprintf(name, sizeof(name), "op%04d", graph_.ops_size() - 1);
    op->set_name(name);
    op->set_compute_ns(compute_ns);
    op->set_output_bytes(output_bytes);
    op->set_persistent_bytes(persistent_bytes);
    op->set_temp_bytes(temp_bytes);
    return graph_.ops_size() - 1;
  }
  void AddEdge(int src, int dst, int64_t bytes = 0) {
    v1::Edge* e = graph_.add_edges();
    e->set_src(src);
    e->set_dst(dst);
    e->set_bytes(bytes);
  }
  v1::Op* op(int i) { return graph_.mutable_ops(i); }
  void Colocate(int op_index, const std::string& group) {
    op(op_index)->set_colocation_group(group);
  }
  void Pin(int op_index, int device) { op(op_index)->set_pinned_device(DeviceName(device)); }

  int AddDevice(int64_t memory_bytes, double speed = 1.0, const std::string& kind = "gpu",
                const std::string& node = "host0") {
    v1::Device* d = cluster_.add_devices();
    d->set_name(DeviceName(cluster_.devices_size() - 1));
    d->set_kind(kind);
    d->set_node(node);
    d->set_memory_bytes(memory_bytes);
    d->set_speed(speed);
    return cluster_.devices_size() - 1;
  }
  void AddDevices(int count, int64_t memory_bytes, double speed = 1.0) {
    for (int i = 0; i < count; ++i) AddDevice(memory_bytes, speed);
  }
  // Same link for every pair (intra- and inter-node).
  void SetLink(int64_t bandwidth_bytes_per_second, int64_t latency_ns) {
    for (v1::LinkSpec* spec : {cluster_.mutable_intra_node(), cluster_.mutable_inter_node()}) {
      spec->set_bandwidth_bytes_per_second(bandwidth_bytes_per_second);
      spec->set_latency_ns(latency_ns);
    }
  }
  static std::string DeviceName(int i) { return "dev" + std::to_string(i); }

  v1::Graph& graph() { return graph_; }
  v1::Cluster& cluster() { return cluster_; }

  // Aborts on invalid input: a test that builds a wrong graph is itself broken.
  Model Build(double memory_headroom = 0.0) const {
    absl::StatusOr<Model> model = BuildModel(graph_, cluster_, memory_headroom);
    if (!model.ok()) {
      std::fprintf(stderr, "TestModel::Build: %s\n", model.status().ToString().c_str());
      std::abort();
    }
    return *std::move(model);
  }

 private:
  v1::Graph graph_;
  v1::Cluster cluster_;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_REPAIR_TEST_MODEL_H_
