// request_fingerprints.h — remembers, for requests seen before byte for byte, their request_digest and
// op order, so that a repeat is answered from the result cache without rebuilding the model.
//
// The fingerprint is SHA-256 of the request's deterministic serialization. Equal serializations mean
// equal messages (parsing the bytes gives the message back), hence the same validated model, the same
// request_digest and the same op order — so skipping validation, model building and the canonical
// digest for them is exact, not a heuristic. A request with its ops in another order has another
// fingerprint and takes the full path (and still hits the cache through request_digest). SHA-256 keeps
// one caller from crafting a collision with another's request. Bounded in bytes, least recently used
// entries go first.
//
// Example:
//   RequestFingerprints fingerprints({.max_bytes = 64 << 20});
//   std::string fingerprint = RequestFingerprints::Of(request);
//   if (auto known = fingerprints.Find(fingerprint)) UseDigestAndOrder(known->request_digest, ...);
//   else fingerprints.Insert(fingerprint, digest, model.request_index);
#ifndef PLACEMENT_SERVICE_CORE_REQUEST_FINGERPRINTS_H_
#define PLACEMENT_SERVICE_CORE_REQUEST_FINGERPRINTS_H_

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "placement/v1/placement.pb.h"

namespace placement::core {

class RequestFingerprints {
 public:
  struct Options {
    // Bound of keys + op orders kept; 0 disables the index.
    int64_t max_bytes = int64_t{64} << 20;
  };
  struct Known {
    std::string request_digest;
    std::shared_ptr<const std::vector<int32_t>> request_index;
  };

  explicit RequestFingerprints(Options options) : options_(options) {}

  // SHA-256 (raw 32 bytes) of the deterministic serialization of `request`.
  static std::string Of(const v1::PlaceRequest& request);

  std::optional<Known> Find(const std::string& fingerprint) ABSL_LOCKS_EXCLUDED(mu_);
  void Insert(const std::string& fingerprint, const std::string& request_digest,
              const std::vector<int32_t>& request_index) ABSL_LOCKS_EXCLUDED(mu_);
  int64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string fingerprint;
    Known known;
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

#endif  // PLACEMENT_SERVICE_CORE_REQUEST_FINGERPRINTS_H_
