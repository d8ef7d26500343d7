#include "service/engine/importers/exporters.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement::engine::importers {
namespace {

// A qualitative palette; devices beyond it cycle.
constexpr const char* kPalette[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                    "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};

std::string DotQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string CsvField(absl::string_view text) {
  if (text.find_first_of(",\"\r\n") == absl::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

absl::Status CheckPlacement(const v1::PlaceRequest& request, const v1::Placement& placement) {
  const int ops = request.graph().ops_size();
  if (placement.device_size() != ops) {
    return absl::InvalidArgumentError(absl::StrCat("placement.device has ", placement.device_size(),
                                                   " entries but the request has ", ops, " ops"));
  }
  const int devices = request.cluster().devices_size();
  for (int i = 0; i < ops; ++i) {
    if (placement.device(i) < 0 || placement.device(i) >= devices) {
      return absl::InvalidArgumentError(absl::StrCat("placement.device[", i, "]: index ",
                                                     placement.device(i), " out of range (cluster has ",
                                                     devices, " devices)"));
    }
  }
  return absl::OkStatus();
}

std::string ToDot(const v1::PlaceRequest& request, const v1::Placement& placement) {
  const v1::Graph& graph = request.graph();
  const v1::Cluster& cluster = request.cluster();
  constexpr size_t kColors = sizeof(kPalette) / sizeof(kPalette[0]);
  std::string out = "digraph placement {\n  node [shape=box, style=filled];\n";
  absl::StrAppend(&out, "  subgraph cluster_legend {\n    label=\"devices\";\n");
  for (int d = 0; d < cluster.devices_size(); ++d) {
    absl::StrAppend(&out, "    ", DotQuote(absl::StrCat("device:", cluster.devices(d).name())),
                    " [label=", DotQuote(cluster.devices(d).name()), ", fillcolor=\"",
                    kPalette[d % kColors], "\"];\n");
  }
  absl::StrAppend(&out, "  }\n");
  for (int i = 0; i < graph.ops_size(); ++i) {
    const int d = placement.device(i);
    absl::StrAppend(&out, "  ", DotQuote(graph.ops(i).name()), " [fillcolor=\"", kPalette[d % kColors],
                    "\", tooltip=", DotQuote(cluster.devices(d).name()), "];\n");
  }
  for (const v1::Edge& edge : graph.edges()) {
    if (edge.src() < 0 || edge.src() >= graph.ops_size() || edge.dst() < 0 ||
        edge.dst() >= graph.ops_size()) {
      continue;
    }
    const bool crosses = placement.device(edge.src()) != placement.device(edge.dst());
    absl::StrAppend(&out, "  ", DotQuote(graph.ops(edge.src()).name()), " -> ",
                    DotQuote(graph.ops(edge.dst()).name()),
                    crosses ? " [color=red, penwidth=2]" : (edge.bytes() == 0 ? " [style=dashed]" : ""),
                    ";\n");
  }
  out += "}\n";
  return out;
}

std::string ToCsv(const v1::PlaceRequest& request, const v1::Placement& placement) {
  std::string out = "name,device\n";
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    absl::StrAppend(&out, CsvField(request.graph().ops(i).name()), ",",
                    CsvField(request.cluster().devices(placement.device(i)).name()), "\n");
  }
  return out;
}

std::string ToParDnn(const v1::PlaceRequest& request, const v1::Placement& placement) {
  std::vector<int> part(request.cluster().devices_size(), -1);
  int next = 0;
  for (int d = 0; d < request.cluster().devices_size(); ++d) {
    if (request.cluster().devices(d).kind() != "cpu") part[d] = next++;
  }
  std::string out;
  for (int i = 0; i < request.graph().ops_size(); ++i) {
    const v1::Op& op = request.graph().ops(i);
    if (op.type() == "NoOp") continue;
    absl::StrAppend(&out, op.name(), " ", part[placement.device(i)], "\n");
  }
  return out;
}

}  // namespace

const std::vector<std::string>& ExportFormats() {
  static const auto* formats = new std::vector<std::string>{"dot", "csv", "pardnn"};
  return *formats;
}

absl::StatusOr<std::string> ExportPlacement(absl::string_view format, const v1::PlaceRequest& request,
                                            const v1::Placement& placement) {
  if (absl::Status status = CheckPlacement(request, placement); !status.ok()) return status;
  if (format == "dot") return ToDot(request, placement);
  if (format == "csv") return ToCsv(request, placement);
  if (format == "pardnn") return ToParDnn(request, placement);
  return absl::InvalidArgumentError(absl::StrCat("unknown export format '", format,
                                                 "' (expected one of ",
                                                 absl::StrJoin(ExportFormats(), ", "), ")"));
}

}  // namespace placement::engine::importers
