// digest.h — canonical SHA-256 digests of a model: `graph_digest` and `request_digest` (api.md §1).
//
// Both are computed from the compact Model, never from serialized protobuf: ops in canonical (name) order,
// merged edges by (src name, dst name), fixed-width little-endian integers, length-prefixed strings,
// IEEE-754 bit patterns for the two doubles (device speed, memory headroom), and a format tag. They are
// therefore independent of the order of ops and edges in the request. Streaming: no big strings are built.
//
// Example:
//   std::string g = GraphDigestHex(model);
//   std::string r = RequestDigestHex(model, {.algorithm = "pardnn", .algorithm_version = "1.0", .seed = 7});
#ifndef PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_
#define PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_

#include <cstdint>
#include <string>

#include "service/engine/model/model.h"

namespace placement::engine {

// The options that change a result and therefore belong in the cache key.
struct DigestOptions {
  std::string algorithm;          // canonical name ("pardnn", never empty)
  std::string algorithm_version;  // bumped whenever the algorithm's output may change
  uint64_t seed = 0;
};

// SHA-256 (lower-case hex) of the canonical graph: op names, types, costs, bytes, colocation groups,
// allowed kinds, pins, and the merged edges.
std::string GraphDigestHex(const Model& model);

// SHA-256 (lower-case hex) of the graph digest, the canonical cluster (devices in order, link matrix),
// the memory headroom and `options`.
std::string RequestDigestHex(const Model& model, const DigestOptions& options);
// Same, reusing an already computed graph digest.
std::string RequestDigestHex(const Model& model, const std::string& graph_digest_hex,
                             const DigestOptions& options);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_MODEL_DIGEST_H_
