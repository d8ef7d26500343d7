#include "service/core/repeat_index.h"

#include <openssl/evp.h>

#include <memory>
#include <utility>

namespace placement::core {

std::string RepeatIndex::KeyOf(absl::Span<const absl::string_view> pieces) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                   &EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // Allocation failures inside OpenSSL leave no key: the request then takes the full path.
  if (context == nullptr || EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) != 1) return "";
  for (absl::string_view piece : pieces) {
    if (EVP_DigestUpdate(context.get(), piece.data(), piece.size()) != 1) return "";
  }
  if (EVP_DigestFinal_ex(context.get(), digest, &length) != 1) return "";
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::optional<KnownRequest> RepeatIndex::Find(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->known;
}

void RepeatIndex::Insert(const std::string& key, const KnownRequest& known) {
  const size_t ops = known.request_index == nullptr ? 0 : known.request_index->size();
  const int64_t charge = static_cast<int64_t>(2 * key.size() + known.request_digest.size() +
                                              known.request_id.size() +
                                              known.algorithm.size() + ops * sizeof(int32_t)) +
                         192;
  if (charge > options_.max_bytes) return;
  {
    absl::MutexLock lock(&mu_);
    if (index_.contains(key)) return;
  }
  // The copy of the op order is made outside the lock: it may be millions of entries.
  KnownRequest kept = known;
  kept.request_index = known.request_index == nullptr
                           ? std::make_shared<const std::vector<int32_t>>()
                           : std::make_shared<const std::vector<int32_t>>(*known.request_index);
  absl::MutexLock lock(&mu_);
  if (index_.contains(key)) return;
  while (!entries_.empty() && bytes_ + charge > options_.max_bytes) {
    bytes_ -= entries_.back().charge;
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
  entries_.push_front(Entry{key, std::move(kept), charge});
  index_.emplace(key, entries_.begin());
  bytes_ += charge;
}

int64_t RepeatIndex::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace placement::core
