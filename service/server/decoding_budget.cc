#include "service/server/decoding_budget.h"

namespace placement::server {

bool DecodingBudget::TryReserve(int64_t bytes) {
  int64_t current = in_use_.load();
  while (true) {
    // A request alone always fits (else the largest allowed message could never be served).
    if (max_bytes_ > 0 && current > 0 && current + bytes > max_bytes_) return false;
    if (in_use_.compare_exchange_weak(current, current + bytes)) return true;
  }
}

void DecodingBudget::Release(int64_t bytes) { in_use_.fetch_sub(bytes); }

}  // namespace placement::server
