// repeat_index.h — remembers, for requests seen before byte for byte, what answering them from the
// result cache needs, so that a repeat is answered without being decoded, validated or modelled again.
//
// The key is SHA-256 of the request's bytes as they arrived. Equal bytes parse into equal messages,
// hence the same validated model, request_digest, op order, device count, time limit and request_id —
// so skipping everything between the bytes and the cache lookup for them is exact, not a heuristic.
// The same request encoded differently (fields or ops in another order) has another key and takes the
// full path, where it still hits the cache through request_digest. SHA-256 keeps one caller from
// crafting a collision with another's request. Bounded in bytes; least recently used entries go first.
//
// Example:
//   RepeatIndex index({.max_bytes = 64 << 20});
//   std::string key = RepeatIndex::KeyOf(wire);          // the received bytes, in pieces
//   if (std::optional<KnownRequest> known = index.Find(key)) LookUp(known->request_digest);
//   else index.Insert(key, KnownRequest{digest, request_id, order, num_devices, time_limit});
#ifndef PLACEMENT_SERVICE_CORE_REPEAT_INDEX_H_
#define PLACEMENT_SERVICE_CORE_REPEAT_INDEX_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace placement::core {

// What the core needs to answer a validated request from the cache: look its answer up, check the
// answer fits it, map it to the caller's op order, and name the operation of a SubmitPlacement.
struct KnownRequest {
  std::string request_digest;
  std::string request_id;
  std::string algorithm;  // its canonical name (options.algorithm "" is the default's name)
  // request_index[canonical op] = position in the caller's graph.ops.
  std::shared_ptr<const std::vector<int32_t>> request_index;
  int32_t num_devices = 0;
  absl::Duration time_limit;
};

class RepeatIndex {
 public:
  struct Options {
    // Bound of keys + what they map to; 0 disables the index.
    int64_t max_bytes = int64_t{64} << 20;
  };

  explicit RepeatIndex(Options options) : options_(options) {}

  bool enabled() const { return options_.max_bytes > 0; }

  // SHA-256 (raw 32 bytes) of the concatenation of `pieces`, without concatenating them.
  static std::string KeyOf(absl::Span<const absl::string_view> pieces);

  std::optional<KnownRequest> Find(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps a copy of `known` (and of its op order) under `key`; no-op when the key is known.
  void Insert(const std::string& key, const KnownRequest& known) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string key;
    KnownRequest known;
    int64_t charge = 0;
  };
  using List = std::list<Entry>;

  const Options options_;
  mutable absl::Mutex mu_;
  List entries_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<std::string, List::iterator> index_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::core

#endif  // PLACEMENT_SERVICE_CORE_REPEAT_INDEX_H_
