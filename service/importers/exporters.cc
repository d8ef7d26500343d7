#include "service/importers/exporters.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement::importers {
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

// Characters the reference's parser strips or splits on ("->", "::", spaces, quotes), or that our own
// importer strips (';' and DOT attributes in [...]). '-' goes too: the reference's splitter drops the
// delimiter's first character after a failed partial match, so a name ending in '-' breaks "a-->b".
bool UnsafeForParDnn(char c) {
  switch (c) {
    case ' ': case '\t': case '\n': case '\r': case '\v': case '\f':
    case '"': case ';': case '[': case ']': case ':': case '-': case '>':
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<std::string> ParDnnNames(const v1::Graph& graph) {
  std::vector<std::string> names(graph.ops_size());
  absl::flat_hash_set<std::string> used = {"src", "snk"};
  std::vector<int> clashed;
  for (int i = 0; i < graph.ops_size(); ++i) {
    std::string name = graph.ops(i).name();
    for (char& c : name) {
      if (UnsafeForParDnn(c)) c = '_';
    }
    if (!name.empty() && name[0] == '^') name[0] = '_';  // "^x" means a control pseudo node there
    if (name.empty() || !used.insert(name).second) {
      clashed.push_back(i);  // named after every clean name is taken, so no clean name moves
    }
    names[i] = std::move(name);
  }
  for (int i : clashed) {
    std::string name = absl::StrCat(names[i], "_", i);
    while (!used.insert(name).second) absl::StrAppend(&name, "_");
    names[i] = std::move(name);
  }
  return names;
}

absl::StatusOr<std::vector<ExportedFile>> ExportParDnnInputs(const v1::PlaceRequest& request) {
  const v1::Graph& graph = request.graph();
  const int n = graph.ops_size();
  const std::vector<std::string> names = ParDnnNames(graph);
  // Distinct edges in request order, parallel edges' bytes summed (the simulator merges them so).
  std::vector<std::pair<int32_t, int32_t>> edges;
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int64_t> bytes_of;
  for (int e = 0; e < graph.edges_size(); ++e) {
    const v1::Edge& edge = graph.edges(e);
    if (edge.src() < 0 || edge.src() >= n || edge.dst() < 0 || edge.dst() >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph.edges[", e, "]: op index out of range (graph has ", n, " ops)"));
    }
    if (edge.src() == edge.dst()) continue;
    auto [it, inserted] = bytes_of.try_emplace({edge.src(), edge.dst()}, 0);
    if (inserted) edges.push_back(it->first);
    it->second += std::max<int64_t>(0, edge.bytes());
  }
  std::vector<bool> has_in(n, false), has_out(n, false);
  std::vector<int64_t> out_bytes(n, 0);
  std::string dot = "digraph{\n";
  for (auto [a, b] : edges) {
    has_out[a] = true;
    has_in[b] = true;
    out_bytes[a] = std::max(out_bytes[a], bytes_of[{a, b}]);
    absl::StrAppend(&dot, names[a], "->", names[b], "\n");
  }
  for (int i = 0; i < n; ++i) {
    if (!has_in[i]) absl::StrAppend(&dot, "src->", names[i], "\n");
  }
  for (int i = 0; i < n; ++i) {
    if (!has_out[i]) absl::StrAppend(&dot, names[i], "->snk\n");
  }
  dot += "}\n";
  std::string durations, sizes;
  for (int i = 0; i < n; ++i) {
    const int64_t us = std::max<int64_t>(
        1, std::llround(static_cast<double>(std::max<int64_t>(0, graph.ops(i).compute_ns())) / 1000.0));
    absl::StrAppend(&durations, names[i], "::", us, "\n");
    if (has_out[i]) absl::StrAppend(&sizes, names[i], "::", out_bytes[i], "\n");
  }
  std::vector<ExportedFile> files;
  files.push_back({"crn_src_sink_low.dot", std::move(dot)});
  files.push_back({"nodes_average_durations_fixed.txt", std::move(durations)});
  files.push_back({"tensors_sz_32_low.txt", std::move(sizes)});
  for (const char* empty : {"var_nodes.txt", "ref_nodes.txt", "no_ops.txt"}) files.push_back({empty, ""});
  return files;
}

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

}  // namespace placement::importers
