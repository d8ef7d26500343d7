// pipedream_importer.h — imports PipeDream profiler layer graphs (`graph.txt`, msr-fiddle/pipedream).
//
// Format (text):
//   nodeN -- <module repr> -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//            activation_size=<bytes or [b1; b2; ...]>, parameter_size=<bytes>
//   <TAB>nodeA -- nodeB
// Mapping: one layer per node (name "nodeN", type = the module repr up to its first '('),
// forward / backward times in ms -> ns, activation_size (summed over the list form) -> output bytes,
// parameter_size -> parameter bytes; edges carry the producer's activation bytes. Layers whose repr
// starts with "Input" are data inputs: no backward op and no compute time (PipeDream charges data loading
// to them, which is not part of the step). With training (default) the graph is expanded as described in
// training_graph.h. Cluster: --cluster or DefaultCluster().
//
// Example:
//   absl::StatusOr<v1::PlaceRequest> r = ImportPipeDream("resnet50/graph.txt", ImportOptions());
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_PIPEDREAM_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_PIPEDREAM_IMPORTER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"
#include "service/importers/training_graph.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportPipeDream(absl::string_view path,
                                                 const ImportOptions& options);

// The parsed layer graph before expansion (`path` only names the file in errors).
absl::StatusOr<LayerGraph> ParsePipeDream(absl::string_view path, absl::string_view text);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_PIPEDREAM_IMPORTER_H_
