// digest.cc — canonical SHA-256 digests of a Model (the format is in digest.h).
//
// The hashed stream is built field by field into a small buffer that is handed to OpenSSL's EVP
// interface whenever it fills, so a million-op graph never exists as one string.

#include "service/engine/model/digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"

namespace placement::engine {
namespace {

// Bump when the hashed stream changes: old cache entries then simply stop matching.
constexpr absl::string_view kGraphFormat = "placement.v1.graph_digest/1";
constexpr absl::string_view kRequestFormat = "placement.v1.request_digest/1";

// A failing EVP call means a broken OpenSSL installation or no memory: an invariant, not bad input, so
// it crashes loudly; stderr is the one channel left before abort() (the engine reports nothing else there).
void CheckEvp(int ok, const char* what) {
  if (ok == 1) return;
  std::fprintf(stderr, "digest: OpenSSL %s failed\n", what);
  std::abort();
}

template <typename T>
void PutLittleEndian(T v, unsigned char* out) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(out, &v, sizeof(T));
#else
  for (size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
#endif
}

// Streaming SHA-256 with fixed-width little-endian integers and length-prefixed strings.
class Sha256Stream {
 public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr) CheckEvp(0, "EVP_MD_CTX_new");
    CheckEvp(EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr), "EVP_DigestInit_ex");
  }
  ~Sha256Stream() { EVP_MD_CTX_free(ctx_); }
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;

  void U32(uint32_t v) {
    Reserve(4);
    PutLittleEndian(v, buffer_ + used_);
    used_ += 4;
  }
  void U64(uint64_t v) {
    Reserve(8);
    PutLittleEndian(v, buffer_ + used_);
    used_ += 8;
  }
  // One merged edge: src, dst (u32 each) and bytes (i64); the caller reserved the room.
  void EdgeUnchecked(uint32_t src, uint32_t dst, int64_t bytes) {
    PutLittleEndian(src, buffer_ + used_);
    PutLittleEndian(dst, buffer_ + used_ + 4);
    PutLittleEndian(static_cast<uint64_t>(bytes), buffer_ + used_ + 8);
    used_ += kEdgeBytes;
  }
  // Makes room for `edges` edges if they fit in the buffer at all; returns how many may be written
  // with EdgeUnchecked before the next Reserve.
  size_t ReserveEdges(size_t edges) {
    const size_t fit = std::min(edges, kBufferBytes / kEdgeBytes);
    Reserve(fit * kEdgeBytes);
    return fit;
  }
  static constexpr size_t kEdgeBytes = 16;
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    U64(bits);
  }
  // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
  void Str(absl::string_view s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }

  std::string FinishHex() {
    Flush();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    CheckEvp(EVP_DigestFinal_ex(ctx_, digest, &length), "EVP_DigestFinal_ex");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex(2 * length, '0');
    for (unsigned int i = 0; i < length; ++i) {
      hex[2 * i] = kHex[digest[i] >> 4];
      hex[2 * i + 1] = kHex[digest[i] & 15];
    }
    return hex;
  }

 private:
  static constexpr size_t kBufferBytes = 16384;  // large enough for OpenSSL's fast path

  void Reserve(size_t n) {
    if (used_ + n > kBufferBytes) Flush();
  }
  void Bytes(const char* data, size_t n) {
    if (n == 0) return;  // data may be null for an empty string_view; memcpy must not see it
    if (n > kBufferBytes - used_) {
      Flush();
      if (n >= kBufferBytes) {
        CheckEvp(EVP_DigestUpdate(ctx_, data, n), "EVP_DigestUpdate");
        return;
      }
    }
    std::memcpy(buffer_ + used_, data, n);
    used_ += n;
  }
  void Flush() {
    if (used_ == 0) return;
    CheckEvp(EVP_DigestUpdate(ctx_, buffer_, used_), "EVP_DigestUpdate");
    used_ = 0;
  }

  EVP_MD_CTX* ctx_;
  unsigned char buffer_[kBufferBytes];
  size_t used_ = 0;
};

}  // namespace

std::string GraphDigestHex(const Model& model) {
  Sha256Stream hash;
  hash.Str(kGraphFormat);
  const OpId n = model.num_ops();
  hash.U64(static_cast<uint64_t>(n));
  hash.U64(static_cast<uint64_t>(model.num_edges()));

  // Allowed kinds are hashed by name, in byte order, so the digest does not depend on kind ids (which
  // follow the cluster's device order).
  std::vector<int32_t> kinds_by_name(model.kind_name.size());
  for (size_t k = 0; k < kinds_by_name.size(); ++k) kinds_by_name[k] = static_cast<int32_t>(k);
  std::sort(kinds_by_name.begin(), kinds_by_name.end(),
            [&model](int32_t a, int32_t b) { return model.kind_name[a] < model.kind_name[b]; });

  for (OpId v = 0; v < n; ++v) {
    hash.Str(model.op_name[v]);
    hash.Str(model.op_type[v]);
    hash.I64(model.compute_ns[v]);
    hash.I64(model.output_bytes[v]);
    hash.I64(model.persistent_bytes[v]);
    hash.I64(model.temp_bytes[v]);
    const int32_t group = model.colocation_group[v];
    hash.Str(group == kNone ? absl::string_view() : absl::string_view(model.group_name[group]));
    const uint64_t mask = model.allowed_kind_mask[v];
    hash.U32(static_cast<uint32_t>(__builtin_popcountll(mask)));
    if (mask != 0) {
      for (int32_t k : kinds_by_name) {
        if ((mask >> k) & 1) hash.Str(model.kind_name[k]);
      }
    }
    const DeviceId pin = model.pinned_device[v];
    hash.Str(pin == kNone ? absl::string_view() : absl::string_view(model.device_name[pin]));
  }
  // Merged edges, sorted by (src, dst) = (src name, dst name).
  for (OpId v = 0; v < n; ++v) {
    for (EdgeId e = model.out_begin(v); e < model.out_end(v);) {
      const size_t room = hash.ReserveEdges(static_cast<size_t>(model.out_end(v) - e));
      for (size_t k = 0; k < room; ++k, ++e) {
        hash.EdgeUnchecked(static_cast<uint32_t>(v), static_cast<uint32_t>(model.out_dst[e]),
                           model.out_bytes[e]);
      }
    }
  }
  // Training plans (api.md §2.1): the once_per_step ops, only when there are any, so that a graph
  // without them keeps the digest it always had.
  if (model.has_once_ops) {
    hash.Str("once_per_step");
    uint64_t count = 0;
    for (OpId v = 0; v < n; ++v) count += model.is_once(v) ? 1 : 0;
    hash.U64(count);
    for (OpId v = 0; v < n; ++v) {
      if (model.is_once(v)) hash.U32(static_cast<uint32_t>(v));
    }
  }
  return hash.FinishHex();
}

std::string RequestDigestHex(const Model& model, std::string_view algorithm,
                             std::string_view algorithm_version, uint64_t seed,
                             std::string_view graph_digest_hex) {
  Sha256Stream hash;
  hash.Str(kRequestFormat);
  if (graph_digest_hex.empty()) {
    hash.Str(GraphDigestHex(model));
  } else {
    hash.Str(absl::string_view(graph_digest_hex.data(), graph_digest_hex.size()));
  }
  const DeviceId num_devices = model.num_devices();
  hash.U32(static_cast<uint32_t>(num_devices));
  for (DeviceId d = 0; d < num_devices; ++d) {
    hash.Str(model.device_name[d]);
    hash.Str(model.kind_name[model.device_kind[d]]);
    hash.Str(model.node_name[model.device_node[d]]);
    hash.I64(model.memory_bytes[d]);
    hash.F64(model.speed[d]);
  }
  // The effective link of every unordered pair (the matrix is symmetric): clusters that spell the same
  // links differently (defaults vs. overrides) hash alike.
  for (DeviceId a = 0; a < num_devices; ++a) {
    for (DeviceId b = a + 1; b < num_devices; ++b) {
      const LinkCost& link = model.Link(a, b);
      hash.I64(link.bandwidth_bytes_per_second);
      hash.I64(link.latency_ns);
    }
  }
  hash.F64(model.memory_headroom == 0.0 ? 0.0 : model.memory_headroom);
  hash.Str(absl::string_view(algorithm.data(), algorithm.size()));
  hash.Str(absl::string_view(algorithm_version.data(), algorithm_version.size()));
  hash.U64(seed);
  // Training plan (api.md §2.1), only when it is not the default one, so that plain requests keep the
  // digest they always had. The plan as requested: 0 = "the solver chooses" is its own value.
  if (!(model.plan == TrainingPlan())) {
    hash.Str("plan");
    hash.U32(static_cast<uint32_t>(model.plan.microbatches));
    hash.U32(static_cast<uint32_t>(model.plan.max_in_flight));
    hash.U32(static_cast<uint32_t>(model.plan.data_parallel));
  }
  // Re-placement, only with a previous placement, so that every other request keeps its digest. Ops by
  // canonical id, devices by cluster index (a departed device as kDepartedDevice: which device left does
  // not change the answer, only that it did).
  if (model.has_previous_placement()) {
    hash.Str("previous_placement");
    uint64_t count = 0;
    for (const DeviceId d : model.previous_device) count += d != kNone ? 1 : 0;
    hash.U64(count);
    for (OpId v = 0; v < model.num_ops(); ++v) {
      const DeviceId d = model.previous_device[v];
      if (d == kNone) continue;
      hash.U32(static_cast<uint32_t>(v));
      hash.I64(d);
    }
    hash.F64(model.move_weight_ns_per_byte == 0.0 ? 0.0 : model.move_weight_ns_per_byte);
  }
  return hash.FinishHex();
}

std::string RequestDigestHex(const Model& model, const DigestOptions& options) {
  return RequestDigestHex(model, options.algorithm, options.algorithm_version, options.seed);
}

std::string RequestDigestHex(const Model& model, const std::string& graph_digest_hex,
                             const DigestOptions& options) {
  return RequestDigestHex(model, options.algorithm, options.algorithm_version, options.seed,
                          graph_digest_hex);
}

}  // namespace placement::engine
