#include "service/importers/pipedream_importer.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/importers/import_util.h"

namespace placement::importers {
namespace {

constexpr absl::string_view kSeparator = " -- ";

// "44302336.000" or "[6291456.0; 131072.0; 131072.0]" -> total bytes.
absl::StatusOr<double> ParseSize(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  if (absl::ConsumePrefix(&value, "[")) {
    if (!absl::ConsumeSuffix(&value, "]")) return absl::InvalidArgumentError("unclosed '['");
    double total = 0;
    for (absl::string_view part : absl::StrSplit(value, ';', absl::SkipWhitespace())) {
      absl::StatusOr<double> one = ParseSize(part);
      if (!one.ok()) return one.status();
      total += *one;
    }
    return total;
  }
  double number = 0;
  if (!absl::SimpleAtod(value, &number)) {
    return absl::InvalidArgumentError(absl::StrCat("'", value, "' is not a number"));
  }
  return number;
}

struct NodeLine {
  absl::string_view name;
  absl::string_view repr;
  absl::string_view attributes;
};

}  // namespace

absl::StatusOr<LayerGraph> ParsePipeDream(absl::string_view path, absl::string_view text) {
  LayerGraph graph;
  absl::flat_hash_map<std::string, int32_t> layer_of_name;
  // Edges may name nodes defined later in the file; resolve them at the end.
  struct PendingEdge {
    std::string src, dst;
    int64_t line;
  };
  std::vector<PendingEdge> pending;

  const std::vector<absl::string_view> lines = SplitLines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t line_number = static_cast<int64_t>(i) + 1;
    absl::string_view line = lines[i];
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const bool indented = line.front() == '\t' || line.front() == ' ';
    line = absl::StripAsciiWhitespace(line);
    if (indented) {
      std::vector<absl::string_view> parts = absl::StrSplit(line, kSeparator);
      if (parts.size() != 2) {
        return FileError(path, line_number, "expected an edge line 'nodeA -- nodeB'");
      }
      pending.push_back({std::string(absl::StripAsciiWhitespace(parts[0])),
                         std::string(absl::StripAsciiWhitespace(parts[1])), line_number});
      continue;
    }
    // The module repr may itself contain " -- "; the name ends at the first separator, the attributes
    // start after the last one.
    const size_t first = line.find(kSeparator);
    const size_t last = line.rfind(kSeparator);
    if (first == absl::string_view::npos || first == last) {
      return FileError(path, line_number,
                       "expected a node line 'nodeN -- <module> -- forward_compute_time=...'");
    }
    NodeLine node{line.substr(0, first),
                  line.substr(first + kSeparator.size(), last - first - kSeparator.size()),
                  line.substr(last + kSeparator.size())};
    LayerSpec layer;
    layer.name = std::string(node.name);
    const size_t paren = node.repr.find('(');
    layer.type = std::string(absl::StripAsciiWhitespace(node.repr.substr(0, paren)));
    bool have_forward = false, have_backward = false, have_activation = false, have_params = false;
    double forward_ms = 0, backward_ms = 0, activation = 0, parameters = 0;
    // Split on ", " only outside brackets ("[a; b]" uses ';', so a plain split is safe).
    for (absl::string_view attribute : absl::StrSplit(node.attributes, ',', absl::SkipWhitespace())) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(attribute, '=');
      const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
      absl::StatusOr<double> value = ParseSize(kv.second);
      if (!value.ok()) {
        return FileError(path, line_number, absl::StrCat(key, ": ", value.status().message()));
      }
      if (key == "forward_compute_time") {
        forward_ms = *value;
        have_forward = true;
      } else if (key == "backward_compute_time") {
        backward_ms = *value;
        have_backward = true;
      } else if (key == "activation_size") {
        activation = *value;
        have_activation = true;
      } else if (key == "parameter_size") {
        parameters = *value;
        have_params = true;
      }
    }
    if (!have_forward || !have_backward || !have_activation || !have_params) {
      return FileError(path, line_number,
                       "node line lacks one of forward_compute_time, backward_compute_time, "
                       "activation_size, parameter_size");
    }
    layer.needs_gradient = !absl::StartsWith(layer.type, "Input");
    absl::StatusOr<int64_t> forward_ns = MillisecondsToNs(forward_ms);
    absl::StatusOr<int64_t> backward_ns = MillisecondsToNs(backward_ms);
    absl::StatusOr<int64_t> output_bytes = ToBytes(activation);
    absl::StatusOr<int64_t> parameter_bytes = ToBytes(parameters);
    for (const absl::StatusOr<int64_t>* value :
         {&forward_ns, &backward_ns, &output_bytes, &parameter_bytes}) {
      if (!value->ok()) return FileError(path, line_number, value->status().message());
    }
    layer.forward_ns = layer.needs_gradient ? *forward_ns : 0;
    layer.backward_ns = *backward_ns;
    layer.output_bytes = *output_bytes;
    layer.parameter_bytes = *parameter_bytes;
    if (!layer_of_name.emplace(layer.name, static_cast<int32_t>(graph.layers.size())).second) {
      return FileError(path, line_number, absl::StrCat("node '", layer.name, "' defined twice"));
    }
    graph.layers.push_back(std::move(layer));
  }
  if (graph.layers.empty()) return FileError(path, 0, "no node lines found");

  absl::flat_hash_set<std::pair<int32_t, int32_t>> seen;  // a repeated edge line is one edge
  for (const PendingEdge& edge : pending) {
    auto src = layer_of_name.find(edge.src);
    auto dst = layer_of_name.find(edge.dst);
    if (src == layer_of_name.end() || dst == layer_of_name.end()) {
      return FileError(path, edge.line,
                       absl::StrCat("edge names unknown node '",
                                    src == layer_of_name.end() ? edge.src : edge.dst, "'"));
    }
    if (src->second == dst->second) {
      return FileError(path, edge.line, absl::StrCat("self edge on '", edge.src, "'"));
    }
    if (!seen.insert({src->second, dst->second}).second) continue;
    graph.edges.push_back(
        {src->second, dst->second, graph.layers[src->second].output_bytes});
  }
  return graph;
}

absl::StatusOr<v1::PlaceRequest> ImportPipeDream(absl::string_view path,
                                                 const ImportOptions& options) {
  absl::StatusOr<std::string> text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<LayerGraph> layers = ParsePipeDream(path, *text);
  if (!layers.ok()) return layers.status();
  return MakeRequest(BuildLayerGraph(*layers, options.training, options.roofline),
                     options.cluster.value_or(DefaultCluster()));
}

}  // namespace placement::importers
