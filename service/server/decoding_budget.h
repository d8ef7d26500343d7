// decoding_budget.h — bounds the memory of the requests being decoded and validated at once.
//
// A decoded request takes roughly kDecodedBytesPerWireByte times its wire size (one protobuf message per
// op and edge, plus the model built from it). Every call reserves that estimate before its body is
// decoded and gives it back once its job is admitted or it is answered (raw_call.h); a call that would
// exceed the bound gets UNAVAILABLE + RetryInfo (--max_decoding_bytes). A call alone always fits, or
// the largest message the server accepts could never be served. Thread-safe, lock-free.
//
// Example:
//   DecodingBudget budget(int64_t{2} << 30);
//   if (!budget.TryReserve(wire_bytes * kDecodedBytesPerWireByte)) return Busy();
//   ... decode, validate, admit ...
//   budget.Release(wire_bytes * kDecodedBytesPerWireByte);
#ifndef PLACEMENT_SERVICE_SERVER_DECODING_BUDGET_H_
#define PLACEMENT_SERVICE_SERVER_DECODING_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace placement::server {

// A decoded request takes roughly this many times its wire size.
inline constexpr int64_t kDecodedBytesPerWireByte = 20;

class DecodingBudget {
 public:
  // 0 = unbounded.
  explicit DecodingBudget(int64_t max_bytes) : max_bytes_(max_bytes) {}
  // Reserves `bytes`; false when that would exceed the bound (a reservation alone always fits).
  bool TryReserve(int64_t bytes);
  void Release(int64_t bytes);
  int64_t in_use() const { return in_use_.load(); }

 private:
  const int64_t max_bytes_;
  std::atomic<int64_t> in_use_{0};
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_DECODING_BUDGET_H_
