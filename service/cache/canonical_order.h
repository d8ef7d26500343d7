// canonical_order.h — moving a placement between a caller's op order and the canonical op order.
//
// The engine numbers ops canonically (by name, see service/engine/model/model.h); `request_index[v]` is
// the position of canonical op v in the caller's graph.ops. A Placement's `device` field is in the
// caller's order; the cache stores it in canonical order, so the same graph sent with its ops in another
// order is a hit and gets the devices mapped back to *its* order. Everything else in a Placement
// (outcome, metrics per device in cluster order, provenance) does not depend on the op order.
//
// Example:
//   CachedPlacement canonical = ToCanonicalOrder(placement, model.request_index);
//   v1::Placement mine = ToRequestOrder(*canonical, other_model.request_index);
#ifndef PLACEMENT_SERVICE_CACHE_CANONICAL_ORDER_H_
#define PLACEMENT_SERVICE_CACHE_CANONICAL_ORDER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "placement/v1/placement.pb.h"

namespace placement::cache {

// `placement` (device in request order) → the same placement with device in canonical order.
// Requires placement.device_size() == request_index.size() (checked: a mismatch is a bug and aborts).
std::shared_ptr<const v1::Placement> ToCanonicalOrder(const v1::Placement& placement,
                                                      const std::vector<int32_t>& request_index);

// `canonical` → a copy with device in the order of the request described by `request_index`.
void ToRequestOrder(const v1::Placement& canonical, const std::vector<int32_t>& request_index,
                    v1::Placement* out);
v1::Placement ToRequestOrder(const v1::Placement& canonical,
                             const std::vector<int32_t>& request_index);

}  // namespace placement::cache

#endif  // PLACEMENT_SERVICE_CACHE_CANONICAL_ORDER_H_
