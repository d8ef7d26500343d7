// sim_test_util.h — (tests only) small requests written by name and a fixture that builds, places and
// simulates them, for the simulator's hand-computed tests (§2 and the training plans of §2.1).
//
// Unless a test says otherwise, links move 1 byte per ns (bandwidth kBytesPerNs = 1e9 bytes/s), so a
// transfer of B bytes takes latency + B ns.
//
// Example:
//   RequestBuilder b;
//   b.Op("a", 100, 1000).Op("b", 50).Edge("a", "b", 400).Device("d0").Device("d1").IntraNode(kBytesPerNs, 10);
//   Fixture f(b);
//   const SimResult& r = f.Place("a", "d0").Place("b", "d1").Run();
//   EXPECT_EQ(f.Start(r, "b"), 510);
#ifndef PLACEMENT_SERVICE_ENGINE_SIM_SIM_TEST_UTIL_H_
#define PLACEMENT_SERVICE_ENGINE_SIM_SIM_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/model_test_util.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/sim/simulator.h"

namespace placement::engine {

inline constexpr int64_t kBytesPerNs = 1'000'000'000;  // bandwidth of 1 byte per ns

// Builds small PlaceRequests by name.
class RequestBuilder {
 public:
  RequestBuilder& Op(const std::string& name, int64_t compute_ns, int64_t output_bytes = 0,
                     int64_t persistent_bytes = 0, int64_t temp_bytes = 0) {
    v1::Op* op = request_.mutable_graph()->add_ops();
    op->set_name(name);
    op->set_compute_ns(compute_ns);
    op->set_output_bytes(output_bytes);
    op->set_persistent_bytes(persistent_bytes);
    op->set_temp_bytes(temp_bytes);
    return *this;
  }
  // Marks the op (added before) as running once per step (api.md §2.1).
  RequestBuilder& Once(const std::string& name) {
    request_.mutable_graph()->mutable_ops(OpIndex(name))->set_once_per_step(true);
    return *this;
  }
  // The training plan (api.md §2.1); data_parallel < 0 leaves it unset (= 1).
  RequestBuilder& Plan(int32_t microbatches, int32_t max_in_flight, int32_t data_parallel = -1) {
    v1::PlacementOptions* options = request_.mutable_options();
    options->set_microbatches(microbatches);
    options->set_max_in_flight(max_in_flight);
    if (data_parallel >= 0) options->set_data_parallel(data_parallel);
    return *this;
  }
  RequestBuilder& Edge(const std::string& src, const std::string& dst, int64_t bytes) {
    v1::Edge* edge = request_.mutable_graph()->add_edges();
    edge->set_src(OpIndex(src));
    edge->set_dst(OpIndex(dst));
    edge->set_bytes(bytes);
    return *this;
  }
  RequestBuilder& Device(const std::string& name, const std::string& node = "n0",
                         double speed = 1.0, int64_t memory_bytes = int64_t{1} << 40,
                         const std::string& kind = "gpu") {
    v1::Device* device = request_.mutable_cluster()->add_devices();
    device->set_name(name);
    device->set_kind(kind);
    device->set_node(node);
    device->set_memory_bytes(memory_bytes);
    if (speed != 1.0) device->set_speed(speed);
    return *this;
  }
  RequestBuilder& IntraNode(int64_t bandwidth, int64_t latency_ns) {
    request_.mutable_cluster()->mutable_intra_node()->set_bandwidth_bytes_per_second(bandwidth);
    request_.mutable_cluster()->mutable_intra_node()->set_latency_ns(latency_ns);
    return *this;
  }
  RequestBuilder& InterNode(int64_t bandwidth, int64_t latency_ns) {
    request_.mutable_cluster()->mutable_inter_node()->set_bandwidth_bytes_per_second(bandwidth);
    request_.mutable_cluster()->mutable_inter_node()->set_latency_ns(latency_ns);
    return *this;
  }
  RequestBuilder& Link(const std::string& a, const std::string& b, int64_t bandwidth,
                       int64_t latency_ns) {
    v1::Link* link = request_.mutable_cluster()->add_links();
    link->set_a(a);
    link->set_b(b);
    link->mutable_spec()->set_bandwidth_bytes_per_second(bandwidth);
    link->mutable_spec()->set_latency_ns(latency_ns);
    return *this;
  }
  const v1::PlaceRequest& request() const { return request_; }

 private:
  int32_t OpIndex(const std::string& name) const {
    for (int32_t i = 0; i < request_.graph().ops_size(); ++i) {
      if (request_.graph().ops(i).name() == name) return i;
    }
    ADD_FAILURE() << "no op " << name;
    return 0;
  }
  v1::PlaceRequest request_;
};

// A built model plus name lookups and one simulation. With a data-parallel plan the model is replica
// group 0's (ReplicaGroupModel), as every algorithm sees it.
class Fixture {
 public:
  explicit Fixture(const RequestBuilder& builder) {
    absl::StatusOr<Model> model = BuildModel(builder.request());
    EXPECT_TRUE(model.ok()) << model.status();
    if (model.ok()) {
      model_ = model->plan.data_parallel > 1 ? ReplicaGroupModel(*model, model->plan.data_parallel)
                                             : *std::move(model);
    }
    assignment_.assign(model_.num_ops(), 0);
  }
  const Model& model() const { return model_; }
  OpId Op(const std::string& name) const { return OpNamed(model_, name); }
  DeviceId Dev(const std::string& name) const { return DeviceNamed(model_, name); }
  Fixture& Place(const std::string& op, const std::string& device) {
    assignment_[Op(op)] = Dev(device);
    return *this;
  }
  const SimResult& Run(bool record = false) {
    sim_ = std::make_unique<Simulator>(model_);
    SimOptions options;
    options.record_memory_intervals = record;
    options.record_transfers = record;
    return sim_->Run(assignment_, options);
  }
  const Assignment& assignment() const { return assignment_; }
  // Start and finish of the op's copy `microbatch` (0 for a once op).
  int64_t Start(const SimResult& r, const std::string& op, int32_t microbatch = 0) const {
    return r.StartNs(Op(op), microbatch, model_.num_ops());
  }
  int64_t Finish(const SimResult& r, const std::string& op, int32_t microbatch = 0) const {
    return r.FinishNs(Op(op), microbatch, model_.num_ops());
  }
  int64_t Peak(const SimResult& r, const std::string& device) const {
    return r.peak_memory_bytes[Dev(device)];
  }
  int64_t PeakTime(const SimResult& r, const std::string& device) const {
    return r.peak_time_ns[Dev(device)];
  }

 private:
  Model model_;
  Assignment assignment_;
  std::unique_ptr<Simulator> sim_;
};

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SIM_SIM_TEST_UTIL_H_
