#include "service/importers/msr_importer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "service/importers/import_util.h"

namespace placement::importers {
namespace {

using nlohmann::json;

// The files' edge costs are size / 2^31 B/s: in seconds for the LayerGraphs and milliseconds for the
// OperatorGraphs (a unit mismatch upstream), so only the bandwidth they share is taken: 2 GiB/s.
constexpr int64_t kMsrLinkBytesPerSecond = int64_t{1} << 31;

}  // namespace

absl::StatusOr<v1::PlaceRequest> ImportMsrText(absl::string_view path, absl::string_view text,
                                               const ImportOptions& options,
                                               std::vector<int64_t>* layer_of_op) {
  absl::StatusOr<json> doc = ParseJson(path, text);
  if (!doc.ok()) return doc.status();
  const JsonContext ctx(path);
  auto root = [] { return std::string(); };

  absl::StatusOr<const json*> nodes = ctx.Array(*doc, "nodes", root);
  if (!nodes.ok()) return nodes.status();
  absl::StatusOr<const json*> edges = ctx.Array(*doc, "edges", root);
  if (!edges.ok()) return edges.status();

  v1::Graph graph;
  graph.mutable_ops()->Reserve(static_cast<int>((*nodes)->size()));
  absl::flat_hash_map<int64_t, int32_t> op_of_id;
  absl::flat_hash_map<int64_t, std::vector<int32_t>> members_of_color;
  UniqueNames names;
  bool any_cpu_only = false;
  if (layer_of_op != nullptr) layer_of_op->clear();

  for (size_t i = 0; i < (*nodes)->size(); ++i) {
    const json& node = (**nodes)[i];
    auto where = [i] { return IndexPath("nodes", i); };
    absl::StatusOr<int64_t> id = ctx.Integer(node, "id", where);
    if (!id.ok()) return id.status();
    const json* name_value = JsonContext::Find(node, "name");
    std::string name = name_value != nullptr && name_value->is_string()
                           ? name_value->get<std::string>()
                           : absl::StrCat("node", *id);
    absl::StatusOr<bool> on_accelerator = ctx.BoolOr(node, "supportedOnFpga", true, where);
    if (!on_accelerator.ok()) return on_accelerator.status();
    absl::StatusOr<double> latency =
        ctx.Number(node, *on_accelerator ? "fpgaLatency" : "cpuLatency", where);
    if (!latency.ok()) return latency.status();
    absl::StatusOr<double> size = ctx.NumberOr(node, "size", 0.0, where);
    if (!size.ok()) return size.status();
    absl::StatusOr<bool> backward = ctx.BoolOr(node, "isBackwardNode", false, where);
    if (!backward.ok()) return backward.status();

    absl::StatusOr<int64_t> compute_ns = MillisecondsToNs(*latency);
    if (!compute_ns.ok()) {
      return ctx.Error(where, *on_accelerator ? "fpgaLatency" : "cpuLatency",
                       compute_ns.status().message());
    }
    absl::StatusOr<int64_t> bytes = ToBytes(*size);
    if (!bytes.ok()) return ctx.Error(where, "size", bytes.status().message());

    const int32_t index = graph.ops_size();
    if (!op_of_id.emplace(*id, index).second) {
      return ctx.Error(where, "id", absl::StrCat("duplicate node id ", *id));
    }
    v1::Op* op = graph.add_ops();
    op->set_name(names.Make(name));
    op->set_type(*backward ? "backward" : "forward");
    op->set_compute_ns(*compute_ns);
    op->set_persistent_bytes(*bytes);
    if (!*on_accelerator) {
      op->add_allowed_kinds("cpu");
      any_cpu_only = true;
    }
    if (layer_of_op != nullptr) {
      const json* layer = JsonContext::Find(node, "layerId");
      layer_of_op->push_back(layer != nullptr && layer->is_number_integer() ? layer->get<int64_t>()
                                                                            : -1);
    }
    if (const json* color = JsonContext::Find(node, "colorClass"); color != nullptr) {
      if (!color->is_number_integer()) {
        return ctx.Error(where, "colorClass", "expected an integer");
      }
      members_of_color[color->get<int64_t>()].push_back(index);
    }
  }

  // Colocation groups: only classes with several members constrain anything.
  for (const auto& [color, members] : members_of_color) {
    if (members.size() < 2) continue;
    const std::string group = absl::StrCat("color", color);
    for (int32_t member : members) graph.mutable_ops(member)->set_colocation_group(group);
  }

  std::vector<int64_t> largest_output(graph.ops_size(), 0);
  graph.mutable_edges()->Reserve(static_cast<int>((*edges)->size()));
  for (size_t i = 0; i < (*edges)->size(); ++i) {
    const json& edge = (**edges)[i];
    auto where = [i] { return IndexPath("edges", i); };
    absl::StatusOr<int64_t> source = ctx.Integer(edge, "sourceId", where);
    if (!source.ok()) return source.status();
    absl::StatusOr<int64_t> dest = ctx.Integer(edge, "destId", where);
    if (!dest.ok()) return dest.status();
    auto src = op_of_id.find(*source);
    if (src == op_of_id.end()) {
      return ctx.Error(where, "sourceId", absl::StrCat("no node has id ", *source));
    }
    auto dst = op_of_id.find(*dest);
    if (dst == op_of_id.end()) {
      return ctx.Error(where, "destId", absl::StrCat("no node has id ", *dest));
    }
    absl::StatusOr<double> size = ctx.NumberOr(edge, "size", 0.0, where);
    if (!size.ok()) return size.status();
    absl::StatusOr<int64_t> bytes = ToBytes(*size);
    if (!bytes.ok()) return ctx.Error(where, "size", bytes.status().message());

    v1::Edge* out = graph.add_edges();
    out->set_src(src->second);
    out->set_dst(dst->second);
    out->set_bytes(*bytes);
    largest_output[src->second] = std::max(largest_output[src->second], *bytes);
  }
  if (options.msr_count_activations) {
    for (int32_t i = 0; i < graph.ops_size(); ++i) {
      graph.mutable_ops(i)->set_output_bytes(largest_output[i]);
    }
  }

  v1::Cluster cluster;
  if (options.cluster.has_value()) {
    cluster = *options.cluster;
  } else {
    absl::StatusOr<double> max_size = ctx.Number(*doc, "maxSizePerFPGA", root);
    if (!max_size.ok()) return max_size.status();
    absl::StatusOr<int64_t> max_devices = ctx.Integer(*doc, "maxFPGAs", root);
    if (!max_devices.ok()) return max_devices.status();
    absl::StatusOr<int64_t> memory = ToBytes(*max_size);
    if (!memory.ok() || *memory <= 0) {
      return ctx.Error(root, "maxSizePerFPGA", "expected a positive byte count");
    }
    if (*max_devices <= 0 || *max_devices > 1024) {
      return ctx.Error(root, "maxFPGAs", "expected 1..1024 devices");
    }
    for (int64_t k = 0; k < *max_devices; ++k) {
      v1::Device* device = cluster.add_devices();
      device->set_name(absl::StrCat("acc", k));
      device->set_kind("gpu");
      device->set_node("node0");
      device->set_memory_bytes(*memory);
      device->set_speed(1.0);
    }
    if (any_cpu_only) {
      absl::StatusOr<double> cpus = ctx.NumberOr(*doc, "maxCPUs", 1.0, root);
      if (!cpus.ok()) return cpus.status();
      const int64_t cpu_count = std::max<int64_t>(1, static_cast<int64_t>(*cpus));
      for (int64_t k = 0; k < cpu_count && k < 64; ++k) {
        v1::Device* device = cluster.add_devices();
        *device = DefaultCpuDevice();
        device->set_name(absl::StrCat("cpu", k));
      }
    }
    const int64_t bandwidth = kMsrLinkBytesPerSecond;
    cluster.mutable_intra_node()->set_bandwidth_bytes_per_second(bandwidth);
    cluster.mutable_intra_node()->set_latency_ns(0);
    cluster.mutable_inter_node()->set_bandwidth_bytes_per_second(bandwidth);
    cluster.mutable_inter_node()->set_latency_ns(0);
  }
  return MakeRequest(std::move(graph), std::move(cluster));
}

absl::StatusOr<v1::PlaceRequest> ImportMsr(absl::string_view path, const ImportOptions& options) {
  absl::StatusOr<std::string> text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  return ImportMsrText(path, *text, options);
}

}  // namespace placement::importers
