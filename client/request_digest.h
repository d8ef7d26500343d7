// request_digest.h — the server's request_digest, computed on the client, for cache-affine routing.
//
// A proxy that hashes on `x-placement-digest` (client::kDigestHeader) sends identical requests to the
// same replica, whose in-process cache then answers them. The key has to be exactly what the server
// caches under, so this does not reimplement anything: it builds the same canonical model
// (engine::BuildModel) and hashes it with the same function (engine::RequestDigestHex) and the same
// algorithm name and version (engine::FindAlgorithm) as the server does. It costs one model build
// (milliseconds for a 100k-op graph) — the price of routing on content rather than on bytes, which
// differ for the same graph sent in another op order.
//
// Example:
//   PlacementClient client({.target = "placement-router:8080", .routing_digest = RequestDigestOf});
//   client.Place(request);   // carries x-placement-digest: <hex sha-256>
#ifndef PLACEMENT_CLIENT_REQUEST_DIGEST_H_
#define PLACEMENT_CLIENT_REQUEST_DIGEST_H_

#include <string>

#include "absl/status/statusor.h"
#include "placement/v1/placement_service.pb.h"

namespace placement::client {

// The request_digest the server reports in provenance for `request` (lower-case hex SHA-256).
// INVALID_ARGUMENT when the server would refuse the request (invalid graph or cluster, unknown
// algorithm) — then there is nothing to route on.
absl::StatusOr<std::string> RequestDigestOf(const v1::PlaceRequest& request);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_REQUEST_DIGEST_H_
