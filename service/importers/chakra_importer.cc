#include "service/importers/chakra_importer.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/importers/import_util.h"
#include "service/importers/roofline.h"

namespace placement::importers {
namespace {

using nlohmann::json;

// Fused multi-tensor ops (e.g. _foreach_add_ over every parameter) touch all of the model's state; joining
// them into the per-layer colocation groups would glue the whole model onto one device.
constexpr size_t kMaxStateTensorsToColocate = 16;

struct TensorRef {
  int64_t id = 0;
  int64_t bytes = 0;
  bool on_cpu = false;
};

using Shape = std::vector<int64_t>;

struct EtNode {
  int64_t id = 0;
  int64_t parent = 0;
  int64_t rf_id = -1;
  std::string name;
  std::vector<TensorRef> reads;
  std::vector<TensorRef> writes;
  std::vector<Shape> input_shapes;   // one per input (empty when not a plain shape)
  std::vector<Shape> output_shapes;  // one per output
};

// ---------------------------------------------------------------- ET parsing

bool IsTensorTuple(const json& value) {
  if (!value.is_array() || value.size() < 5) return false;
  for (size_t i = 0; i < 5; ++i) {
    if (!value[i].is_number_integer()) return false;
  }
  return true;
}

void AddTensor(const json& value, std::vector<TensorRef>& out) {
  TensorRef ref;
  ref.id = value[0].get<int64_t>();
  const int64_t numel = value[3].get<int64_t>();
  const int64_t element_bytes = value[4].get<int64_t>();
  ref.bytes = numel > 0 && element_bytes > 0 ? numel * element_bytes : 0;
  ref.on_cpu = value.size() >= 6 && value[5].is_string() && value[5].get<std::string>() == "cpu";
  out.push_back(ref);
}

// Tensors among `values`, guided by `types` ("Tensor(float)", "GenericList[Tensor(float),...]").
void CollectTensors(const json& values, const json* types, std::vector<TensorRef>& out) {
  if (!values.is_array()) return;
  for (size_t i = 0; i < values.size(); ++i) {
    const json& value = values[i];
    absl::string_view type;
    if (types != nullptr && types->is_array() && i < types->size() && (*types)[i].is_string()) {
      type = (*types)[i].get_ref<const std::string&>();
    }
    const bool typed = !type.empty();
    if ((!typed || absl::StartsWith(type, "Tensor")) && IsTensorTuple(value)) {
      AddTensor(value, out);
    } else if ((!typed || absl::StartsWith(type, "GenericList[Tensor")) && value.is_array()) {
      for (const json& item : value) {
        if (IsTensorTuple(item)) AddTensor(item, out);
      }
    }
  }
}

std::vector<Shape> CollectShapes(const json* shapes) {
  std::vector<Shape> out;
  if (shapes == nullptr || !shapes->is_array()) return out;
  out.reserve(shapes->size());
  for (const json& shape : *shapes) {
    Shape dims;
    if (shape.is_array()) {
      for (const json& dim : shape) {
        if (!dim.is_number_integer()) {
          dims.clear();
          break;
        }
        dims.push_back(dim.get<int64_t>());
      }
    }
    out.push_back(std::move(dims));
  }
  return out;
}

absl::StatusOr<std::vector<EtNode>> ParseEt(const JsonContext& ctx, const json& doc) {
  auto root = [] { return std::string(); };
  absl::StatusOr<const json*> nodes = ctx.Array(doc, "nodes", root);
  if (!nodes.ok()) return nodes.status();
  std::vector<EtNode> out;
  out.reserve((*nodes)->size());
  for (size_t i = 0; i < (*nodes)->size(); ++i) {
    const json& node = (**nodes)[i];
    auto where = [i] { return IndexPath("nodes", i); };
    EtNode et;
    absl::StatusOr<int64_t> id = ctx.Integer(node, "id", where);
    if (!id.ok()) return id.status();
    et.id = *id;
    absl::StatusOr<std::string> name = ctx.String(node, "name", where);
    if (!name.ok()) return name.status();
    et.name = std::move(*name);
    // 1.0.x: parent, rf_id, inputs / input_types / input_shapes.
    // 1.1.x: ctrl_deps, attrs[{name: rf_id}], inputs {values, shapes, types}.
    const json* parent = JsonContext::Find(node, "parent");
    if (parent == nullptr) parent = JsonContext::Find(node, "ctrl_deps");
    if (parent == nullptr || !parent->is_number_integer()) {
      return ctx.Error(where, "parent", "missing (neither 'parent' nor 'ctrl_deps' is an integer)");
    }
    et.parent = parent->get<int64_t>();
    if (const json* rf = JsonContext::Find(node, "rf_id"); rf != nullptr && rf->is_number_integer()) {
      et.rf_id = rf->get<int64_t>();
    } else if (const json* attrs = JsonContext::Find(node, "attrs");
               attrs != nullptr && attrs->is_array()) {
      for (const json& attr : *attrs) {
        const json* attr_name = JsonContext::Find(attr, "name");
        const json* value = JsonContext::Find(attr, "value");
        if (attr_name != nullptr && value != nullptr && attr_name->is_string() &&
            attr_name->get_ref<const std::string&>() == "rf_id" && value->is_number_integer()) {
          et.rf_id = value->get<int64_t>();
          break;
        }
      }
    }
    for (const bool is_input : {true, false}) {
      const char* key = is_input ? "inputs" : "outputs";
      const json* values = JsonContext::Find(node, key);
      if (values == nullptr) continue;
      const json* types = nullptr;
      const json* shapes = nullptr;
      if (values->is_object()) {
        types = JsonContext::Find(*values, "types");
        shapes = JsonContext::Find(*values, "shapes");
        values = JsonContext::Find(*values, "values");
        if (values == nullptr) continue;
      } else {
        types = JsonContext::Find(node, is_input ? "input_types" : "output_types");
        shapes = JsonContext::Find(node, is_input ? "input_shapes" : "output_shapes");
      }
      if (!values->is_array()) return ctx.Error(where, key, "expected an array of values");
      CollectTensors(*values, types, is_input ? et.reads : et.writes);
      (is_input ? et.input_shapes : et.output_shapes) = CollectShapes(shapes);
    }
    out.push_back(std::move(et));
  }
  if (out.empty()) return ctx.Error(root, "nodes", "empty");
  return out;
}

// ---------------------------------------------------------------- structure

// Annotations rather than operators: profiler process / thread nodes, ProfilerStep#N, "## x ##" and
// other record_function scopes (Optimizer.step#..., DistributedDataParallel.forward, ...). Operators
// carry a namespace ("aten::", "autograd::", "c10d::", ...).
bool IsWrapper(absl::string_view name) {
  return !absl::StrContains(name, "::") || absl::StartsWith(name, "[pytorch|profiler|");
}

int64_t StepNumber(absl::string_view name) {
  int64_t step = -1;
  if (absl::ConsumePrefix(&name, "ProfilerStep#") && absl::SimpleAtoi(name, &step)) return step;
  return -1;
}

// ---------------------------------------------------------------- costs

double Elements(const Shape& shape) {
  double n = 1;
  for (int64_t d : shape) n *= d > 0 ? static_cast<double>(d) : 1.0;
  return n;
}

const Shape& ShapeAt(const std::vector<Shape>& shapes, size_t i) {
  static const Shape kEmpty;
  return i < shapes.size() ? shapes[i] : kEmpty;
}

int64_t LastDim(const Shape& shape) { return shape.empty() || shape.back() <= 0 ? 1 : shape.back(); }

// FLOPs of a node whose kernel we know; -1 for unknown ops (the caller descends into their children).
double KnownFlops(const EtNode& node) {
  absl::string_view name = node.name;
  absl::ConsumePrefix(&name, "aten::");
  const Shape& out = ShapeAt(node.output_shapes, 0);
  if (name == "conv2d" || name == "conv1d" || name == "conv3d" || name == "convolution" ||
      name == "_convolution" || name == "cudnn_convolution" || name == "mkldnn_convolution") {
    const Shape& weight = ShapeAt(node.input_shapes, 1);
    double per_output = 1;
    for (size_t i = 1; i < weight.size(); ++i) per_output *= static_cast<double>(std::max<int64_t>(1, weight[i]));
    return 2.0 * Elements(out) * per_output;
  }
  if (name == "convolution_backward" || name == "cudnn_convolution_backward") {
    // inputs: grad_output, input, weight; data and weight gradients: twice the forward FLOPs.
    const Shape& grad_output = ShapeAt(node.input_shapes, 0);
    const Shape& weight = ShapeAt(node.input_shapes, 2);
    double per_output = 1;
    for (size_t i = 1; i < weight.size(); ++i) per_output *= static_cast<double>(std::max<int64_t>(1, weight[i]));
    return 4.0 * Elements(grad_output) * per_output;
  }
  if (name == "mm" || name == "bmm" || name == "matmul") {
    return 2.0 * Elements(out) * static_cast<double>(LastDim(ShapeAt(node.input_shapes, 0)));
  }
  if (name == "addmm" || name == "baddbmm") {
    return 2.0 * Elements(out) * static_cast<double>(LastDim(ShapeAt(node.input_shapes, 1)));
  }
  if (name == "linear") {
    return 2.0 * Elements(out) * static_cast<double>(LastDim(ShapeAt(node.input_shapes, 0)));
  }
  return -1;
}

// ---------------------------------------------------------------- Kineto

struct KinetoTimes {
  // ET rf_id -> GPU µs (median over the matched iterations).
  absl::flat_hash_map<int64_t, double> gpu_us_of_rf;
  int64_t iterations = 0;
};

absl::StatusOr<KinetoTimes> ReadKineto(const std::string& path, const std::vector<EtNode>& et) {
  absl::StatusOr<json> doc = ParseJsonFile(path);
  if (!doc.ok()) return doc.status();
  const JsonContext ctx(path);
  absl::StatusOr<const json*> events = ctx.Array(*doc, "traceEvents", [] { return std::string(); });
  if (!events.ok()) return events.status();

  struct Span {
    double ts = 0, end = 0;
    int64_t external_id = -1;  // cpu_op: its External id; runtime: -1
    int64_t correlation = -1;  // runtime only
    bool is_op = false;
  };
  absl::flat_hash_map<int64_t, std::vector<Span>> spans_of_tid;
  absl::flat_hash_map<int64_t, absl::string_view> name_of_external;
  absl::flat_hash_map<int64_t, double> gpu_us_of_correlation;
  auto number = [](const json& object, const char* key, double fallback) {
    const json* value = JsonContext::Find(object, key);
    return value != nullptr && value->is_number() ? value->get<double>() : fallback;
  };
  for (const json& event : **events) {
    const json* category = JsonContext::Find(event, "cat");
    if (category == nullptr || !category->is_string()) continue;
    const std::string& cat = category->get_ref<const std::string&>();
    const json* args = JsonContext::Find(event, "args");
    if (args == nullptr) continue;
    const bool is_op = cat == "cpu_op";
    const bool is_runtime = cat == "cuda_runtime" || cat == "cuda_driver";
    const bool is_gpu = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
    if (!is_op && !is_runtime && !is_gpu) continue;
    const double ts = number(event, "ts", 0), dur = number(event, "dur", 0);
    if (is_gpu) {
      const double correlation = number(*args, "correlation", -1);
      if (correlation >= 0) gpu_us_of_correlation[static_cast<int64_t>(correlation)] += dur;
      continue;
    }
    const json* tid = JsonContext::Find(event, "tid");
    const int64_t thread = tid != nullptr && tid->is_number_integer() ? tid->get<int64_t>() : 0;
    Span span{ts, ts + dur, -1, -1, is_op};
    if (is_op) {
      const double external = number(*args, "External id", -1);
      if (external < 0) continue;
      span.external_id = static_cast<int64_t>(external);
      const json* name = JsonContext::Find(event, "name");
      if (name != nullptr && name->is_string()) {
        name_of_external[span.external_id] = name->get_ref<const std::string&>();
      }
    } else {
      span.correlation = static_cast<int64_t>(number(*args, "correlation", -1));
      if (span.correlation < 0) continue;
    }
    spans_of_tid[thread].push_back(span);
  }

  // The launching cpu_op of each runtime call is the innermost cpu_op around it on the same thread.
  absl::flat_hash_map<int64_t, double> gpu_us_of_external;
  for (auto& [thread, spans] : spans_of_tid) {
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
      if (a.ts != b.ts) return a.ts < b.ts;
      if (a.is_op != b.is_op) return a.is_op;  // ops open before calls starting at the same time
      return a.end > b.end;                    // outer before inner
    });
    std::vector<const Span*> open;
    for (const Span& span : spans) {
      while (!open.empty() && open.back()->end < span.ts) open.pop_back();
      if (span.is_op) {
        open.push_back(&span);
        continue;
      }
      if (open.empty()) continue;
      auto gpu = gpu_us_of_correlation.find(span.correlation);
      if (gpu != gpu_us_of_correlation.end()) gpu_us_of_external[open.back()->external_id] += gpu->second;
    }
  }

  // Align ET rf_id with Kineto External id. Both count record-function calls of one process, so a node's
  // External id is its rf_id plus an offset per profiled iteration; the offset drifts by a few ids where
  // one side recorded calls the other did not, so the alignment re-synchronises locally.
  std::vector<const EtNode*> with_rf;
  for (const EtNode& node : et) {
    if (node.rf_id >= 0 && !IsWrapper(node.name)) with_rf.push_back(&node);
  }
  if (with_rf.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": the ET has no rf_id"));
  std::sort(with_rf.begin(), with_rf.end(),
            [](const EtNode* a, const EtNode* b) { return a->rf_id < b->rf_id; });
  auto matches = [&](size_t i, int64_t offset) {
    auto it = name_of_external.find(with_rf[i]->rf_id + offset);
    return it != name_of_external.end() && it->second == with_rf[i]->name;
  };
  // How far the offset may jump when re-synchronising (one ResNet-18 iteration spans ~1,300 ids; the
  // optimizer tail of the 2023 pair is recorded ~1,000 ids away from where its rf_ids put it), and how
  // many unmatched ops in a row end an alignment that has lost track (keeps wrong files cheap).
  constexpr int64_t kWindow = 2048;
  constexpr int kMaxMissesInRow = 64;
  // external id of each with_rf node (-1 = unmatched), for one starting offset.
  auto align = [&](int64_t offset, std::vector<int64_t>& external) {
    external.assign(with_rf.size(), -1);
    size_t matched = 0;
    int misses_in_row = 0;
    for (size_t i = 0; i < with_rf.size() && misses_in_row < kMaxMissesInRow; ++i) {
      if (!matches(i, offset)) {
        bool resynced = false;
        for (int64_t d = 1; d <= kWindow && !resynced; ++d) {
          for (const int64_t candidate : {offset + d, offset - d}) {
            if (!matches(i, candidate)) continue;
            int confirmed = 0;
            for (size_t j = i + 1; j < std::min(with_rf.size(), i + 4); ++j) confirmed += matches(j, candidate);
            if (confirmed >= 2 || i + 1 == with_rf.size()) {
              offset = candidate;
              resynced = true;
              break;
            }
          }
        }
        if (!resynced) {
          ++misses_in_row;
          continue;
        }
      }
      misses_in_row = 0;
      external[i] = with_rf[i]->rf_id + offset;
      ++matched;
    }
    return matched;
  };
  absl::flat_hash_map<absl::string_view, int64_t> kineto_name_count;
  for (const auto& [external, name] : name_of_external) ++kineto_name_count[name];
  size_t anchor = with_rf.size();
  int64_t anchor_count = 0;
  for (size_t i = 0; i < std::min<size_t>(with_rf.size(), 50); ++i) {
    auto it = kineto_name_count.find(with_rf[i]->name);
    if (it == kineto_name_count.end()) continue;
    if (anchor == with_rf.size() || it->second < anchor_count) {
      anchor = i;
      anchor_count = it->second;
    }
  }
  if (anchor == with_rf.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no cpu_op of the Kineto trace has the name of an ET op"));
  }
  std::vector<std::pair<size_t, std::vector<int64_t>>> alignments;  // (matched, external ids)
  size_t best = 0;
  std::vector<int64_t> external;
  for (const auto& [id, name] : name_of_external) {
    if (name != with_rf[anchor]->name) continue;
    // Cheap filter first: the ops right after the anchor must agree too.
    const int64_t start = id - with_rf[anchor]->rf_id;
    int agree = 0;
    for (size_t j = anchor + 1; j < std::min(with_rf.size(), anchor + 4); ++j) agree += matches(j, start);
    if (agree < std::min<int>(2, static_cast<int>(with_rf.size() - anchor - 1))) continue;
    const size_t matched = align(start, external);
    if (matched * 2 < with_rf.size()) continue;
    best = std::max(best, matched);
    alignments.push_back({matched, external});
  }
  if (best * 10 < with_rf.size() * 9) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": Kineto trace does not match the ET (the best alignment of rf_id to External id "
              "agrees on ", best, " of ", with_rf.size(), " ops)"));
  }
  KinetoTimes times;
  std::vector<const std::vector<int64_t>*> accepted;
  for (const auto& [matched, ids] : alignments) {
    if (matched * 100 >= best * 95) accepted.push_back(&ids);
  }
  times.iterations = static_cast<int64_t>(accepted.size());
  std::vector<double> samples;
  for (size_t i = 0; i < with_rf.size(); ++i) {
    samples.clear();
    for (const std::vector<int64_t>* ids : accepted) {
      if ((*ids)[i] < 0) continue;
      auto gpu = gpu_us_of_external.find((*ids)[i]);
      samples.push_back(gpu == gpu_us_of_external.end() ? 0.0 : gpu->second);
    }
    if (samples.empty()) continue;  // Kineto does not know this op: roofline for it
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    times.gpu_us_of_rf[with_rf[i]->rf_id] = samples[samples.size() / 2];
  }
  return times;
}

}  // namespace

absl::StatusOr<v1::PlaceRequest> ImportChakra(absl::string_view path, const ImportOptions& options,
                                              ChakraImportStats* stats) {
  absl::StatusOr<std::string> bytes = ReadInputFile(path);
  if (!bytes.ok()) return bytes.status();
  if (LooksLikeTar(*bytes)) {
    absl::StatusOr<std::string> member = ExtractFromTar(path, *bytes, ".json");
    if (!member.ok()) return member.status();
    *bytes = std::move(*member);
  }
  std::vector<EtNode> et;
  {
    absl::StatusOr<json> doc = ParseJson(path, *bytes);
    if (!doc.ok()) return doc.status();
    bytes->clear();
    bytes->shrink_to_fit();
    const JsonContext ctx(path);
    absl::StatusOr<std::vector<EtNode>> parsed = ParseEt(ctx, *doc);
    if (!parsed.ok()) return parsed.status();
    et = std::move(*parsed);
  }
  std::sort(et.begin(), et.end(), [](const EtNode& a, const EtNode& b) { return a.id < b.id; });
  const int32_t n = static_cast<int32_t>(et.size());
  absl::flat_hash_map<int64_t, int32_t> index_of_id;
  index_of_id.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    if (!index_of_id.emplace(et[i].id, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": duplicate ET node id ", et[i].id));
    }
  }
  std::vector<std::vector<int32_t>> children(n);  // in id order, since `et` is sorted
  std::vector<int32_t> roots;
  for (int32_t i = 0; i < n; ++i) {
    auto parent = index_of_id.find(et[i].parent);
    if (et[i].parent == et[i].id || parent == index_of_id.end()) {
      roots.push_back(i);
    } else {
      children[parent->second].push_back(i);
    }
  }

  // ---- Top-level ops and ProfilerSteps.
  struct TopOp {
    int32_t node;
    int32_t step;  // index into `steps`, -1 = outside any step wrapper
  };
  std::vector<TopOp> top;
  std::vector<int32_t> steps;  // ProfilerStep wrapper nodes
  {
    std::vector<std::pair<int32_t, int32_t>> stack;  // (node, step)
    for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.push_back({*it, -1});
    std::vector<bool> visited(n, false);
    while (!stack.empty()) {
      auto [node, step] = stack.back();
      stack.pop_back();
      if (visited[node]) continue;  // defends against parent cycles in broken files
      visited[node] = true;
      if (!IsWrapper(et[node].name)) {
        top.push_back({node, step});
        continue;
      }
      if (StepNumber(et[node].name) >= 0) {
        step = static_cast<int32_t>(steps.size());
        steps.push_back(node);
      }
      for (auto child = children[node].rbegin(); child != children[node].rend(); ++child) {
        stack.push_back({*child, step});
      }
    }
  }
  int32_t chosen_step = -1;
  if (!steps.empty()) {
    // Steps sorted by id: ops outside wrappers belong to the step whose id range holds them.
    std::vector<int32_t> order(steps.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return et[steps[a]].id < et[steps[b]].id; });
    for (TopOp& op : top) {
      if (op.step >= 0) continue;
      for (int32_t s : order) {
        if (et[steps[s]].id <= et[op.node].id) op.step = s;
      }
    }
    std::vector<int64_t> ops_in_step(steps.size(), 0);
    for (const TopOp& op : top) {
      if (op.step >= 0) ++ops_in_step[op.step];
    }
    for (int32_t s : order) {
      const bool wanted = options.chakra_step >= 0
                              ? StepNumber(et[steps[s]].name) == options.chakra_step
                              : ops_in_step[s] > 0;
      if (wanted) {
        chosen_step = s;
        break;
      }
    }
    if (chosen_step < 0) {
      return absl::InvalidArgumentError(
          options.chakra_step >= 0
              ? absl::StrCat(path, ": no ProfilerStep#", options.chakra_step, " in the trace")
              : absl::StrCat(path, ": every ProfilerStep is empty"));
    }
    std::vector<TopOp> kept;
    for (const TopOp& op : top) {
      if (op.step == chosen_step) kept.push_back(op);
    }
    top = std::move(kept);
  }
  std::sort(top.begin(), top.end(),
            [&](const TopOp& a, const TopOp& b) { return et[a.node].id < et[b.node].id; });
  if (top.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no operators in the trace"));

  std::optional<KinetoTimes> kineto;
  if (!options.kineto_path.empty()) {
    absl::StatusOr<KinetoTimes> times = ReadKineto(options.kineto_path, et);
    if (!times.ok()) return times.status();
    kineto = std::move(*times);
  }

  // ---- Per op: subtree reads / writes, FLOPs, GPU time.
  const int32_t ops = static_cast<int32_t>(top.size());
  struct OpData {
    std::vector<TensorRef> reads, writes;  // distinct tensors, external reads only
    double flops = 0;
    double gpu_us = 0;
    bool has_gpu_time = false;
  };
  std::vector<OpData> data(ops);
  std::vector<int32_t> subtree;
  std::vector<int32_t> stack;
  for (int32_t k = 0; k < ops; ++k) {
    subtree.clear();
    stack.assign(1, top[k].node);
    while (!stack.empty()) {  // pre-order = id order within the subtree
      const int32_t node = stack.back();
      stack.pop_back();
      subtree.push_back(node);
      for (auto child = children[node].rbegin(); child != children[node].rend(); ++child) {
        stack.push_back(*child);
      }
    }
    std::sort(subtree.begin(), subtree.end());
    OpData& op = data[k];
    absl::flat_hash_set<int64_t> written_inside, read_seen;
    for (int32_t node : subtree) {
      for (const TensorRef& read : et[node].reads) {
        if (written_inside.contains(read.id) || !read_seen.insert(read.id).second) continue;
        op.reads.push_back(read);
      }
      for (const TensorRef& write : et[node].writes) {
        if (written_inside.insert(write.id).second) op.writes.push_back(write);
      }
      if (kineto.has_value() && et[node].rf_id >= 0) {
        auto gpu = kineto->gpu_us_of_rf.find(et[node].rf_id);
        if (gpu != kineto->gpu_us_of_rf.end()) {
          op.gpu_us += gpu->second;
          op.has_gpu_time = true;
        }
      }
    }
    // FLOPs: the outermost node with a known formula counts; unknown leaves count their elements.
    std::vector<int32_t> walk = {top[k].node};
    while (!walk.empty()) {
      const int32_t node = walk.back();
      walk.pop_back();
      const double known = KnownFlops(et[node]);
      if (known >= 0) {
        op.flops += known;
        continue;
      }
      if (children[node].empty()) {
        for (const Shape& shape : et[node].output_shapes) op.flops += shape.empty() ? 0 : Elements(shape);
        continue;
      }
      walk.insert(walk.end(), children[node].begin(), children[node].end());
    }
  }

  // ---- Dependencies in execution (id) order.
  v1::Graph graph;
  graph.mutable_ops()->Reserve(ops);
  absl::flat_hash_map<int64_t, int32_t> last_writer;
  absl::flat_hash_map<int64_t, std::vector<int32_t>> readers_since_write;
  absl::flat_hash_map<int64_t, int64_t> state_bytes;       // state tensor -> bytes
  absl::flat_hash_map<int64_t, int32_t> state_first_op;    // state tensor -> first op touching it
  std::vector<std::vector<int64_t>> state_of_op(ops);
  absl::flat_hash_map<std::pair<int32_t, int32_t>, int32_t> edge_index;
  std::vector<absl::flat_hash_set<int64_t>> read_later(ops);  // written tensors others read
  auto add_edge = [&](int32_t src, int32_t dst, int64_t bytes) {
    auto [it, inserted] = edge_index.try_emplace({src, dst}, graph.edges_size());
    if (inserted) {
      v1::Edge* edge = graph.add_edges();
      edge->set_src(src);
      edge->set_dst(dst);
      edge->set_bytes(bytes);
    } else {
      v1::Edge* edge = graph.mutable_edges(it->second);
      edge->set_bytes(edge->bytes() + bytes);
    }
  };
  for (int32_t k = 0; k < ops; ++k) {
    for (const TensorRef& read : data[k].reads) {
      auto writer = last_writer.find(read.id);
      if (writer != last_writer.end()) {
        if (writer->second != k) {
          add_edge(writer->second, k, read.bytes);
          read_later[writer->second].insert(read.id);
        }
      } else if (!read.on_cpu && read.bytes > 0) {
        if (state_first_op.try_emplace(read.id, k).second) state_bytes[read.id] = read.bytes;
        state_of_op[k].push_back(read.id);
      }
      readers_since_write[read.id].push_back(k);
    }
    for (const TensorRef& write : data[k].writes) {
      auto writer = last_writer.find(write.id);
      if (writer != last_writer.end() || state_first_op.contains(write.id)) {
        // In-place update: after every reader of the previous value.
        for (int32_t reader : readers_since_write[write.id]) {
          if (reader != k) add_edge(reader, k, 0);
        }
        if (writer != last_writer.end() && writer->second != k) add_edge(writer->second, k, 0);
        if (state_first_op.contains(write.id)) state_of_op[k].push_back(write.id);
      }
      readers_since_write[write.id].clear();
      last_writer[write.id] = k;
    }
  }

  // ---- Colocation through shared state (union-find over ops).
  std::vector<int32_t> parent_of(ops);
  for (int32_t k = 0; k < ops; ++k) parent_of[k] = k;
  auto find = [&](int32_t x) {
    while (parent_of[x] != x) x = parent_of[x] = parent_of[parent_of[x]];
    return x;
  };
  std::vector<int64_t> persistent(ops, 0);
  for (const auto& [tensor, first] : state_first_op) persistent[first] += state_bytes[tensor];
  for (int32_t k = 0; k < ops; ++k) {
    std::vector<int64_t>& state = state_of_op[k];
    std::sort(state.begin(), state.end());
    state.erase(std::unique(state.begin(), state.end()), state.end());
    if (state.size() > kMaxStateTensorsToColocate) continue;
    for (int64_t tensor : state) {
      const int32_t a = find(k), b = find(state_first_op[tensor]);
      if (a != b) parent_of[std::max(a, b)] = std::min(a, b);
    }
  }
  std::vector<int32_t> group_size(ops, 0);
  for (int32_t k = 0; k < ops; ++k) ++group_size[find(k)];

  // ---- Ops.
  int64_t with_kineto = 0;
  std::vector<std::string> op_names(ops);
  for (int32_t k = 0; k < ops; ++k) {
    const EtNode& node = et[top[k].node];
    op_names[k] = absl::StrCat(node.name, "@", node.id);
  }
  for (int32_t k = 0; k < ops; ++k) {
    const EtNode& node = et[top[k].node];
    const OpData& op_data = data[k];
    v1::Op* op = graph.add_ops();
    op->set_name(op_names[k]);
    absl::string_view type = node.name;
    absl::ConsumePrefix(&type, "autograd::engine::evaluate_function: ");
    op->set_type(std::string(type));
    int64_t compute_ns = 0;
    if (op_data.has_gpu_time) {
      compute_ns = static_cast<int64_t>(std::llround(op_data.gpu_us * 1000.0));
      ++with_kineto;
    } else {
      double traffic = 0;
      for (const TensorRef& t : op_data.reads) traffic += static_cast<double>(t.bytes);
      for (const TensorRef& t : op_data.writes) traffic += static_cast<double>(t.bytes);
      compute_ns = op_data.flops <= 0 && traffic <= 0
                       ? 0
                       : RooflineNs(op_data.flops, traffic, options.roofline);
    }
    op->set_compute_ns(compute_ns);
    int64_t output_bytes = 0;
    for (const TensorRef& t : op_data.writes) {
      if (read_later[k].contains(t.id)) output_bytes += t.bytes;
    }
    op->set_output_bytes(output_bytes);
    op->set_persistent_bytes(persistent[k]);
    const int32_t root = find(k);
    if (group_size[root] >= 2) op->set_colocation_group(absl::StrCat("state:", op_names[root]));
  }
  if (stats != nullptr) {
    stats->et_nodes = n;
    stats->top_level_ops = ops;
    stats->kineto_iterations_matched = kineto.has_value() ? kineto->iterations : 0;
    stats->ops_with_kineto_time = with_kineto;
  }
  return MakeRequest(std::move(graph), options.cluster.value_or(DefaultCluster()));
}

absl::StatusOr<v1::PlaceRequest> ImportChakra(absl::string_view path, const ImportOptions& options) {
  return ImportChakra(path, options, nullptr);
}

}  // namespace placement::importers
