// wfcommons_importer.h — imports WfCommons WfFormat 1.5 workflow instances (WfInstances).
//
// Format: workflow.specification.tasks[] {id, parents[], children[], inputFiles[], outputFiles[]},
// workflow.specification.files[] {id, sizeInBytes}, workflow.execution.tasks[] {id, runtimeInSeconds,
// memoryInBytes?, ...}.
// Mapping: one op per task (name = task id, type = the task's command program or the id up to its
//   first '_'), compute_ns = runtimeInSeconds, temp_bytes = memoryInBytes (peak while running, where
//   present), output_bytes = total size of the task's output files; one edge per parent -> child with
//   the total size of the files the parent writes and the child reads (0 = ordering only).
// Cluster: --cluster or DefaultCluster() (the instances' machines are batch hosts, not accelerators).
//
// Example:
//   absl::StatusOr<v1::PlaceRequest> r = ImportWfCommons("montage.json.gz", ImportOptions());
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_WFCOMMONS_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_WFCOMMONS_IMPORTER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportWfCommons(absl::string_view path,
                                                 const ImportOptions& options);
absl::StatusOr<v1::PlaceRequest> ImportWfCommonsText(absl::string_view path, absl::string_view text,
                                                     const ImportOptions& options);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_WFCOMMONS_IMPORTER_H_
