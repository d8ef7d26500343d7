#include "service/core/caller_order.h"

#include "service/cache/canonical_order.h"

namespace placement::core {

void WriteInCallerOrder(const v1::Placement& canonical, const std::vector<int32_t>* request_index,
                        v1::CacheResult cache, absl::Duration queue_time, v1::Placement* out) {
  if (request_index != nullptr) {
    cache::ToRequestOrder(canonical, *request_index, out);
  } else {
    *out = canonical;
  }
  v1::Provenance* provenance = out->mutable_provenance();
  provenance->set_cache(cache);
  provenance->set_queue_ns(cache == v1::HIT ? 0 : absl::ToInt64Nanoseconds(queue_time));
}

}  // namespace placement::core
