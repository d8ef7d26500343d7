// model_test_util.h — (tests only) small PlaceRequests written by hand, and ops and devices of a built
// Model found by name, for the engine's tests that state their expectations in names ("x on cpu0")
// while the Model numbers ops canonically.
//
// Example:
//   v1::PlaceRequest request;
//   AddTestOp(request, "x")->add_allowed_kinds("cpu");
//   AddTestDevice(request, "cpu0", "cpu", /*memory_bytes=*/1000);
//   absl::StatusOr<Model> model = BuildModel(request);
//   const OpId x = OpNamed(*model, "x");
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_TEST_UTIL_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_TEST_UTIL_H_

#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/model/model.h"

namespace placement::engine {

// Appends an op to the request's graph and returns it for further settings.
inline v1::Op* AddTestOp(v1::PlaceRequest& request, const std::string& name, int64_t compute_ns = 10) {
  v1::Op* op = request.mutable_graph()->add_ops();
  op->set_name(name);
  op->set_compute_ns(compute_ns);
  return op;
}

// Appends a device to the request's cluster and returns it for further settings.
inline v1::Device* AddTestDevice(v1::PlaceRequest& request, const std::string& name, const std::string& kind,
                                 int64_t memory_bytes) {
  v1::Device* device = request.mutable_cluster()->add_devices();
  device->set_name(name);
  device->set_kind(kind);
  device->set_memory_bytes(memory_bytes);
  return device;
}

// The canonical id of the op called `name`; a test failure (and op 0) when there is none.
inline OpId OpNamed(const Model& model, const std::string& name) {
  for (OpId v = 0; v < model.num_ops(); ++v) {
    if (model.op_name[v] == name) return v;
  }
  ADD_FAILURE() << "no op " << name;
  return 0;
}

// The id of the device called `name`; a test failure (and device 0) when there is none.
inline DeviceId DeviceNamed(const Model& model, const std::string& name) {
  for (DeviceId d = 0; d < model.num_devices(); ++d) {
    if (model.device_name[d] == name) return d;
  }
  ADD_FAILURE() << "no device " << name;
  return 0;
}

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_MODEL_TEST_UTIL_H_
