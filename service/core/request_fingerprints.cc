#include "service/core/request_fingerprints.h"

#include <openssl/sha.h>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace placement::core {

std::string RequestFingerprints::Of(const v1::PlaceRequest& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream output(&stream);
    output.SetSerializationDeterministic(true);
    request.SerializeToCodedStream(&output);
  }
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof(digest));
}

std::optional<RequestFingerprints::Known> RequestFingerprints::Find(
    const std::string& fingerprint) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(fingerprint);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->known;
}

void RequestFingerprints::Insert(const std::string& fingerprint,
                                 const std::string& request_digest,
                                 const std::vector<int32_t>& request_index) {
  const int64_t charge = static_cast<int64_t>(2 * fingerprint.size() + request_digest.size() +
                                              request_index.size() * sizeof(int32_t)) +
                         160;
  if (charge > options_.max_bytes) return;
  auto order = std::make_shared<const std::vector<int32_t>>(request_index);
  absl::MutexLock lock(&mu_);
  if (index_.contains(fingerprint)) return;
  while (!entries_.empty() && bytes_ + charge > options_.max_bytes) {
    bytes_ -= entries_.back().charge;
    index_.erase(entries_.back().fingerprint);
    entries_.pop_back();
  }
  entries_.push_front(Entry{fingerprint, Known{request_digest, std::move(order)}, charge});
  index_.emplace(fingerprint, entries_.begin());
  bytes_ += charge;
}

int64_t RequestFingerprints::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace placement::core
