#include "client/request_digest.h"

#include "absl/strings/str_cat.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/solve/algorithm_registry.h"

namespace placement::client {

absl::StatusOr<std::string> RequestDigestOf(const v1::PlaceRequest& request) {
  std::string_view name = request.options().algorithm();
  if (name.empty()) name = engine::kDefaultAlgorithm;
  const engine::Partitioner* algorithm = engine::FindAlgorithm(name);
  if (algorithm == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.algorithm: unknown algorithm \"", request.options().algorithm(), "\""));
  }
  absl::StatusOr<engine::Model> model = engine::BuildModel(request);
  if (!model.ok()) return model.status();
  return engine::RequestDigestHex(
      *model, engine::DigestOptions{std::string(algorithm->name()), std::string(algorithm->version()),
                                    request.options().seed()});
}

}  // namespace placement::client
