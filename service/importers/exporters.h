// exporters.h — writes a placement in formats other tools read.
//
//   dot     Graphviz digraph, ops filled with one colour per device, a legend of devices;
//   csv     "name,device" with a header line (RFC 4180 quoting), device = the device's name;
//   pardnn  the ParDNN reference's placement file: "name part" lines, part = -1 for devices of kind
//           "cpu" and 0..K-1 for the other devices in cluster order; NoOp-typed ops are left out, as
//           the reference does.
//
// ExportParDnnInputs writes the request's graph (no placement) as the reference's input folder, for
// running the published ParDNN code on our graphs (bench/reference/):
//   crn_src_sink_low.dot            "A->B" lines, each distinct edge once, plus src->v for every op
//                                   without inputs and v->snk for every op without outputs;
//   nodes_average_durations_fixed.txt  "name::µs", compute_ns / 1000 rounded, at least 1 (the
//                                   reference's default, and 0 would leave the op unclustered, §8.7);
//   tensors_sz_32_low.txt           "name::bytes" for every op with outputs: the largest of its edges
//                                   (parallel edges summed); the reference charges one size per producer;
//   var_nodes.txt, ref_nodes.txt, no_ops.txt  empty (the reference requires them).
// Every op is a normal op (NoOp-typed ones too, so that each appears in the reference's output);
// colocation groups, pins, allowed kinds, memory and the cluster are not exported. Names are made safe
// for the reference's line parser: whitespace, '"', ';', '[', ']', ':', '-', '>' become '_', a leading
// '^' becomes '_', and a name that then collides (or is "src"/"snk"/empty) gets "_<op index>" appended.
// `convert --from=pardnn` reads the folder back (same names, µs-rounded costs).
//
// Example:
//   absl::StatusOr<std::string> text = ExportPlacement("csv", request, placement);
//   absl::StatusOr<std::vector<ExportedFile>> files = ExportParDnnInputs(request);
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/placement.pb.h"

namespace placement::importers {

const std::vector<std::string>& ExportFormats();

struct ExportedFile {
  std::string name;  // file name inside the folder
  std::string text;
};

// INVALID_ARGUMENT when the placement does not fit the request (one device per op, each an index into
// cluster.devices) or the format is unknown.
absl::StatusOr<std::string> ExportPlacement(absl::string_view format, const v1::PlaceRequest& request,
                                            const v1::Placement& placement);

// The reference's input folder for the request's graph (see above). INVALID_ARGUMENT when an edge
// names an op out of range.
absl::StatusOr<std::vector<ExportedFile>> ExportParDnnInputs(const v1::PlaceRequest& request);

// The name an op gets in ExportParDnnInputs (all of them, in op order).
std::vector<std::string> ParDnnNames(const v1::Graph& graph);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_EXPORTERS_H_
