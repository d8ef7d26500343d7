// caller_order.h — the one place where a cached or computed answer, kept in canonical op order, becomes
// the answer of one caller: its devices in the caller's op order, and how it was obtained.
//
// Example:
//   WriteInCallerOrder(*cached, request_index, v1::HIT, absl::ZeroDuration(),
//                      response.mutable_placement());
#ifndef PLACEMENT_SERVICE_CORE_CALLER_ORDER_H_
#define PLACEMENT_SERVICE_CORE_CALLER_ORDER_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"

namespace placement::core {

// `canonical` with its devices in the order described by `request_index` (null: kept as it is),
// provenance.cache = `cache` and provenance.queue_ns = `queue_time` (0 for a cache hit, which
// waited in no queue).
void WriteInCallerOrder(const v1::Placement& canonical, const std::vector<int32_t>* request_index,
                        v1::CacheResult cache, absl::Duration queue_time, v1::Placement* out);

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_CALLER_ORDER_H_
