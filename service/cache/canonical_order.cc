#include "service/cache/canonical_order.h"

#include <cstdio>
#include <cstdlib>

namespace placement::cache {
namespace {

void CheckSizes(int device_size, size_t index_size) {
  if (static_cast<size_t>(device_size) != index_size) {
    std::fprintf(stderr, "canonical_order: placement has %d devices but the model has %zu ops\n",
                 device_size, index_size);
    std::abort();
  }
}

// Copies every field but `device` (CanonicalOrderTest.EveryFieldButTheDevicesIsCarried fails when a
// field is added to Placement and not here).
void CopyAllButDevices(const v1::Placement& from, v1::Placement* to) {
  to->set_outcome(from.outcome());
  to->set_reason(from.reason());
  if (from.has_metrics()) *to->mutable_metrics() = from.metrics();
  if (from.has_provenance()) *to->mutable_provenance() = from.provenance();
  if (from.has_plan()) *to->mutable_plan() = from.plan();
}

}  // namespace

std::shared_ptr<const v1::Placement> ToCanonicalOrder(const v1::Placement& placement,
                                                      const std::vector<int32_t>& request_index) {
  CheckSizes(placement.device_size(), request_index.size());
  auto canonical = std::make_shared<v1::Placement>();
  CopyAllButDevices(placement, canonical.get());
  auto* device = canonical->mutable_device();
  device->Resize(static_cast<int>(request_index.size()), 0);
  for (size_t v = 0; v < request_index.size(); ++v) {
    device->Set(static_cast<int>(v), placement.device(request_index[v]));
  }
  return canonical;
}

void ToRequestOrder(const v1::Placement& canonical, const std::vector<int32_t>& request_index,
                    v1::Placement* out) {
  CheckSizes(canonical.device_size(), request_index.size());
  out->Clear();
  CopyAllButDevices(canonical, out);
  auto* device = out->mutable_device();
  device->Resize(static_cast<int>(request_index.size()), 0);
  int32_t* data = device->mutable_data();
  for (size_t v = 0; v < request_index.size(); ++v) data[request_index[v]] = canonical.device(v);
}

v1::Placement ToRequestOrder(const v1::Placement& canonical,
                             const std::vector<int32_t>& request_index) {
  v1::Placement out;
  ToRequestOrder(canonical, request_index, &out);
  return out;
}

}  // namespace placement::cache
