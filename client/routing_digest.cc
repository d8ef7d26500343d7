#include "client/routing_digest.h"

#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"

namespace placement::client {

absl::StatusOr<std::string> RoutingDigestOf(const v1::PlaceRequest& request) {
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) return model.status();
  // The name as written and no version: the algorithm registry stays on the server.
  return engine::RequestDigestHex(*model, request.options().algorithm(), /*algorithm_version=*/"",
                                  request.options().seed());
}

}  // namespace placement::client
