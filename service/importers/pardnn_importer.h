// pardnn_importer.h — imports the ParDNN reference's input folder (../shared/docs/pardnn-reference.md §1.5).
//
// `path` is the folder, or its DOT file (the folder is then the file's directory). Both file-name sets
// of the reference are accepted (each file may also be gzip-compressed, with or without ".gz"):
//   graph      crn_src_sink_low.dot                 | graph.dot      "A->B" lines, with src/snk
//   durations  nodes_average_durations_fixed.txt    | weights.txt    "name::µs"
//   tensors    tensors_sz_32_low.txt                | costs.txt      "name::bytes" (output 0; -1 unknown)
//   var_nodes.txt, ref_nodes.txt, no_ops.txt (names, one a line), memory.txt ("name::bytes", optional),
//   vanilla_cleaned.place ("name idx"; idx -1 = the op is CPU-only), all optional except the graph.
// Lines are cleaned as the reference does (spaces, tabs, quotes removed; also a trailing ';' and DOT
// attributes in [...]); lines that are not two fields are skipped (headers), bad numbers are errors.
//
// Mapping: the pseudo nodes src and snk are dropped; every other node is an op in first-appearance
// order; compute_ns = duration µs (1 µs when missing, as in the reference); output_bytes = memory.txt
// bytes, else the tensor size; variables (var_nodes) hold those bytes as persistent_bytes instead and
// output nothing; NO_OPs (no_ops, and every "^name" node) output nothing and their edges carry 0 bytes;
// every other edge u->v carries u's tensor size. Ref ops join a colocation group with the variables they
// touch (and "<var>/read" with its variable), grown as the reference's `collocate` does: variable ->
// ref-op children -> their variable parents. CPU-only ops get allowed_kinds {"cpu"}; with the default
// cluster a "cpu0" device is added for them.
//
// Example:
//   absl::StatusOr<v1::PlaceRequest> r = ImportParDnn("runs/wrn_14_101_bsz_1", ImportOptions());
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_PARDNN_IMPORTER_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_PARDNN_IMPORTER_H_

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"
#include "service/importers/import_options.h"

namespace placement::importers {

absl::StatusOr<v1::PlaceRequest> ImportParDnn(absl::string_view path, const ImportOptions& options);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_PARDNN_IMPORTER_H_
