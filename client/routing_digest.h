// routing_digest.h — a content key for cache-affine routing, computed on the client.
//
// A proxy that hashes on `x-placement-digest` (client::kDigestHeader) sends requests with the same key to
// the same replica, whose in-process cache then answers the repeats. Routing needs a key that is
// deterministic and independent of the op order in which a caller happens to send the graph — not the
// server's cache key itself — so this links no algorithm: it builds the canonical model
// (engine::BuildModel) and hashes it with the engine's digest function (engine::RequestDigestHex),
// keyed by `options.algorithm` exactly as written in the request ("" stays "") and the seed. The key
// therefore differs from the server's `provenance.request_digest` (which names the resolved algorithm
// and its version), and a request naming the default algorithm explicitly routes apart from one
// leaving it empty; both are fine for routing. It costs one model build (milliseconds for a 100k-op
// graph) — the price of routing on content rather than on bytes, which differ for the same graph
// sent in another op order.
//
// Example:
//   PlacementClient client({.target = "placement-router:8080", .routing_digest = RoutingDigestOf});
//   client.Place(request);   // carries x-placement-digest: <hex sha-256>
#ifndef PLACEMENT_CLIENT_ROUTING_DIGEST_H_
#define PLACEMENT_CLIENT_ROUTING_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "placement/v1/placement_service.pb.h"

namespace placement::client {

// The routing key of `request` (lower-case hex SHA-256): the same for the same graph, cluster, headroom,
// algorithm name and seed in any op or edge order; different when any of them differs.
// INVALID_ARGUMENT (with field paths) when the graph or cluster is invalid — the server would refuse
// the request, so there is nothing to route on. An unknown algorithm name still gets a key: only the
// server knows its algorithms.
absl::StatusOr<std::string> RoutingDigestOf(const v1::PlaceRequest& request);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_ROUTING_DIGEST_H_
