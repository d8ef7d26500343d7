#include "bench/stages/msr_stage_problem.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "service/engine/stages/ideal_lattice.h"
#include "service/engine/stages/stage_dp.h"

namespace placement::bench {
namespace {

using engine::stages::IdealLattice;
using engine::stages::kInfeasible;
using engine::stages::StageClass;
using engine::stages::StageProblem;
using engine::stages::StageSplit;
using engine::stages::StateSpace;
using nlohmann::json;

int64_t Scaled(double ms) { return static_cast<int64_t>(std::llround(ms * kTimeScale)); }

bool Truthy(const json& value) { return value.is_boolean() ? value.get<bool>() : value.get<double>() != 0; }

// Union-find over dense class ids.
struct Classes {
  std::vector<int32_t> parent;
  int32_t Add() {
    parent.push_back(static_cast<int32_t>(parent.size()));
    return parent.back();
  }
  int32_t Find(int32_t c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  }
  // Merges a's class into b's.
  void MergeInto(int32_t a, int32_t b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent[a] = b;
  }
};

// The contracted graph: one forward and one backward vertex per (surviving) class; edges between them
// from the input (true) and added by the preparation (artificial), each a set of vertex pairs.
struct Contracted {
  // Vertex = 2 × class + (backward ? 1 : 0), for classes that have it.
  std::vector<uint8_t> present;           // per vertex
  std::vector<double> cpu_latency, fpga_latency;  // per vertex (for the trivial-node rule)
  std::set<std::pair<int32_t, int32_t>> true_edges, artificial_edges;
};

class Preparation {
 public:
  explicit Preparation(const MsrInput& input) : input_(input) {
    absl::flat_hash_map<int64_t, int32_t> dense;
    class_of_node_.resize(input.nodes.size());
    for (size_t i = 0; i < input.nodes.size(); ++i) {
      const int64_t color = input.nodes[i].color;
      auto it = dense.find(color);
      if (it == dense.end()) it = dense.emplace(color, classes_.Add()).first;
      class_of_node_[i] = it->second;
    }
  }

  // Runs every step; afterwards ElementOf(node) and the forward edges are final.
  void Run() {
    AddOrphanForwardNodes();
    FuseForwardCycles();
    while (MergeOneTrivialNode()) {
    }
  }

  int32_t ClassOf(int32_t node) { return classes_.Find(class_of_node_[node]); }
  // Forward vertices (classes) and the edges among them, after Run().
  Contracted Contract() {
    Contracted c;
    const size_t vertices = 2 * classes_.parent.size();
    c.present.assign(vertices, 0);
    c.cpu_latency.assign(vertices, 0.0);
    c.fpga_latency.assign(vertices, 0.0);
    for (size_t i = 0; i < input_.nodes.size(); ++i) {
      const int32_t v = Vertex(static_cast<int32_t>(i));
      c.present[v] = 1;
      c.cpu_latency[v] += input_.nodes[i].cpu_latency;
      c.fpga_latency[v] += input_.nodes[i].fpga_latency;
    }
    for (const int32_t cls : artificial_forward_) c.present[2 * classes_.Find(cls)] = 1;
    for (const MsrInput::Edge& e : input_.edges) {
      const int32_t a = Vertex(e.src), b = Vertex(e.dst);
      if (a != b) c.true_edges.insert({a, b});
    }
    for (const auto& [from, to] : artificial_class_edges_) {
      const int32_t a = 2 * classes_.Find(from), b = 2 * classes_.Find(to);
      if (a != b) c.artificial_edges.insert({a, b});
    }
    return c;
  }

 private:
  int32_t Vertex(int32_t node) { return 2 * ClassOf(node) + (input_.nodes[node].backward ? 1 : 0); }

  // A class with backward nodes only gets an empty forward node; for every contracted edge between two
  // backward vertices one of which is such a class's, a mirrored edge between their forward vertices.
  void AddOrphanForwardNodes() {
    const Contracted c = Contract();
    std::vector<uint8_t> orphan(classes_.parent.size(), 0);
    for (size_t cls = 0; cls < classes_.parent.size(); ++cls) {
      if (c.present[2 * cls + 1] && !c.present[2 * cls]) {
        orphan[cls] = 1;
        artificial_forward_.push_back(static_cast<int32_t>(cls));
      }
    }
    for (const auto& [a, b] : c.true_edges) {
      if (a % 2 == 1 && b % 2 == 1 && (orphan[a / 2] || orphan[b / 2])) {
        artificial_class_edges_.push_back({b / 2, a / 2});
      }
    }
  }

  // Classes whose forward vertices are mutually reachable through forward vertices are merged.
  void FuseForwardCycles() {
    const Contracted c = Contract();
    const int32_t n = static_cast<int32_t>(c.present.size());
    std::vector<std::vector<int32_t>> out(n);
    for (const auto& edges : {&c.true_edges, &c.artificial_edges}) {
      for (const auto& [a, b] : *edges) {
        if (a % 2 == 0 && b % 2 == 0) out[a].push_back(b);
      }
    }
    // Tarjan's strongly connected components, iteratively.
    std::vector<int32_t> index(n, -1), low(n, 0), stack;
    std::vector<uint8_t> on_stack(n, 0);
    int32_t counter = 0;
    for (int32_t root = 0; root < n; root += 2) {
      if (!c.present[root] || index[root] != -1) continue;
      std::vector<std::pair<int32_t, size_t>> frames{{root, 0}};
      index[root] = low[root] = counter++;
      stack.push_back(root);
      on_stack[root] = 1;
      while (!frames.empty()) {
        auto& [v, next] = frames.back();
        if (next < out[v].size()) {
          const int32_t w = out[v][next++];
          if (index[w] == -1) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = 1;
            frames.push_back({w, 0});
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        if (low[v] == index[v]) {
          while (true) {
            const int32_t w = stack.back();
            stack.pop_back();
            on_stack[w] = 0;
            classes_.MergeInto(w / 2, v / 2);
            if (w == v) break;
          }
        }
        const int32_t done = v;
        frames.pop_back();
        if (!frames.empty()) low[frames.back().first] = std::min(low[frames.back().first], low[done]);
      }
    }
  }

  // A forward vertex without work, with no backward neighbour and exactly one forward neighbour
  // (counting edges, both directions, true and artificial), whose class's backward vertex has no work
  // either, joins that neighbour's class. One merge per call (the graph changes); false when none.
  bool MergeOneTrivialNode() {
    const Contracted c = Contract();
    const int32_t n = static_cast<int32_t>(c.present.size());
    std::vector<std::vector<int32_t>> forward_neighbours(n);
    std::vector<int32_t> backward_neighbours(n, 0);
    auto note = [&](int32_t a, int32_t b) {
      // b's neighbour a, and a's neighbour b, filed by the neighbour's direction.
      if (a % 2 == 0) forward_neighbours[b].push_back(a); else ++backward_neighbours[b];
      if (b % 2 == 0) forward_neighbours[a].push_back(b); else ++backward_neighbours[a];
    };
    for (const auto& [a, b] : c.artificial_edges) note(a, b);
    for (const auto& [a, b] : c.true_edges) note(a, b);
    for (int32_t v = 0; v < n; v += 2) {
      if (!c.present[v] || c.cpu_latency[v] >= 1e-6 || c.fpga_latency[v] >= 1e-6) continue;
      if (backward_neighbours[v] != 0 || forward_neighbours[v].size() != 1) continue;
      if (c.present[v + 1] && c.cpu_latency[v + 1] + c.fpga_latency[v + 1] >= 1e-6) continue;
      classes_.MergeInto(v / 2, forward_neighbours[v][0] / 2);
      return true;
    }
    return false;
  }

  const MsrInput& input_;
  Classes classes_;
  std::vector<int32_t> class_of_node_;
  std::vector<int32_t> artificial_forward_;                       // classes
  std::vector<std::pair<int32_t, int32_t>> artificial_class_edges_;  // forward(class) → forward(class)
};

}  // namespace

absl::StatusOr<MsrInput> ParseMsrInput(const std::string& text) {
  MsrInput input;
  try {
    const json doc = json::parse(text);
    input.max_size_per_fpga = doc.at("maxSizePerFPGA").get<double>();
    input.max_fpgas = doc.at("maxFPGAs").get<int32_t>();
    input.max_cpus = doc.at("maxCPUs").get<int32_t>();
    absl::flat_hash_map<int64_t, int32_t> index_of_id;
    // Nodes without a colorClass get classes of their own, below any class in a file.
    int64_t fresh = std::numeric_limits<int64_t>::min();
    for (const json& node : doc.at("nodes")) {
      MsrInput::Node n;
      n.id = node.at("id").get<int64_t>();
      n.on_fpga = Truthy(node.at("supportedOnFpga"));
      n.cpu_latency = node.at("cpuLatency").get<double>();
      n.fpga_latency = node.at("fpgaLatency").get<double>();
      n.size = node.contains("size") ? node.at("size").get<double>() : 0.0;
      n.backward = Truthy(node.at("isBackwardNode"));
      n.color = node.contains("colorClass") ? node.at("colorClass").get<int64_t>() : fresh++;
      if (!index_of_id.emplace(n.id, static_cast<int32_t>(input.nodes.size())).second) {
        return absl::InvalidArgumentError(absl::StrCat("duplicate node id ", n.id));
      }
      input.nodes.push_back(n);
    }
    input.output_cost.assign(input.nodes.size(), 0.0);
    for (const json& edge : doc.at("edges")) {
      MsrInput::Edge e;
      const auto src = index_of_id.find(edge.at("sourceId").get<int64_t>());
      const auto dst = index_of_id.find(edge.at("destId").get<int64_t>());
      if (src == index_of_id.end() || dst == index_of_id.end()) {
        return absl::InvalidArgumentError("an edge names an unknown node");
      }
      e.src = src->second;
      e.dst = dst->second;
      e.cost = edge.at("cost").get<double>();
      input.output_cost[e.src] = e.cost;
      input.edges.push_back(e);
    }
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat("not an msr input: ", error.what()));
  }
  return input;
}

absl::StatusOr<MsrInput> ReadMsrInput(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<MsrInput> input = ParseMsrInput(text.str());
  if (!input.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", input.status().message()));
  return input;
}

MsrStageProblem BuildMsrStageProblem(const MsrInput& input) {
  Preparation preparation(input);
  preparation.Run();
  const Contracted c = preparation.Contract();
  const int32_t vertices = static_cast<int32_t>(c.present.size());

  // Elements: forward vertices, in a topological order of the forward graph (smallest class first).
  std::vector<std::vector<int32_t>> out(vertices);
  std::vector<int32_t> indegree(vertices, 0);
  for (const auto& edges : {&c.true_edges, &c.artificial_edges}) {
    for (const auto& [a, b] : *edges) {
      if (a % 2 == 0 && b % 2 == 0) {
        out[a].push_back(b);
        ++indegree[b];
      }
    }
  }
  std::set<int32_t> ready;
  for (int32_t v = 0; v < vertices; v += 2) {
    if (c.present[v] && indegree[v] == 0) ready.insert(v);
  }
  std::vector<int32_t> element_of_vertex(vertices, -1);
  int32_t count = 0;
  while (!ready.empty()) {
    const int32_t v = *ready.begin();
    ready.erase(ready.begin());
    element_of_vertex[v] = count++;
    for (const int32_t w : out[v]) {
      if (--indegree[w] == 0) ready.insert(w);
    }
  }
  // Backward vertices ride with their class's forward vertex.
  for (int32_t v = 1; v < vertices; v += 2) element_of_vertex[v] = element_of_vertex[v - 1];

  MsrStageProblem result;
  StageProblem& p = result.problem;
  p.Resize(count, 2);
  result.members.assign(count, {});
  std::vector<int32_t> element_of_node(input.nodes.size());
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    const int32_t cls = preparation.ClassOf(static_cast<int32_t>(i));
    const int32_t e = element_of_vertex[2 * cls + (input.nodes[i].backward ? 1 : 0)];
    element_of_node[i] = e;
    result.members[e].push_back(static_cast<int32_t>(i));
    const MsrInput::Node& node = input.nodes[i];
    p.compute[2 * e] += Scaled(node.fpga_latency);
    p.compute[2 * e + 1] += Scaled(node.cpu_latency);
    p.memory[e] += static_cast<int64_t>(std::llround(node.size));
    if (!node.on_fpga) p.forbidden_classes[e] |= uint64_t{1} << result.fpga_class;
  }
  // Predecessors: every edge between forward vertices, true or artificial.
  std::vector<std::vector<int32_t>> preds(count);
  for (const auto& edges : {&c.true_edges, &c.artificial_edges}) {
    for (const auto& [a, b] : *edges) {
      if (a % 2 == 0 && b % 2 == 0) preds[element_of_vertex[b]].push_back(element_of_vertex[a]);
    }
  }
  for (int32_t e = 0; e < count; ++e) {
    std::sort(preds[e].begin(), preds[e].end());
    preds[e].erase(std::unique(preds[e].begin(), preds[e].end()), preds[e].end());
    p.pred.insert(p.pred.end(), preds[e].begin(), preds[e].end());
    p.pred_offset[e + 1] = static_cast<int32_t>(p.pred.size());
  }
  // Senders: every node with an out-edge to another element, at its output's cost.
  std::vector<std::vector<int32_t>> consumers(input.nodes.size());
  for (const MsrInput::Edge& e : input.edges) {
    if (element_of_node[e.dst] != element_of_node[e.src]) consumers[e.src].push_back(element_of_node[e.dst]);
  }
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    if (consumers[i].empty()) continue;
    std::sort(consumers[i].begin(), consumers[i].end());
    consumers[i].erase(std::unique(consumers[i].begin(), consumers[i].end()), consumers[i].end());
    p.sender_element.push_back(element_of_node[i]);
    p.sender_cost.push_back(Scaled(input.output_cost[i]));
    p.sender_consumer.insert(p.sender_consumer.end(), consumers[i].begin(), consumers[i].end());
    p.sender_consumer_offset.push_back(static_cast<int32_t>(p.sender_consumer.size()));
  }
  StageClass fpga;
  fpga.count = input.max_fpgas;
  fpga.compute_kind = 0;
  fpga.charges_transfers = true;
  fpga.capacity = static_cast<int64_t>(std::floor(input.max_size_per_fpga));
  StageClass cpu;
  cpu.count = input.max_cpus;
  cpu.compute_kind = 1;
  cpu.charges_transfers = false;
  p.classes = {fpga, cpu};
  p.Finish();
  return result;
}

MsrStagePlan SolveMsr(const MsrInput& input, const MsrSolveOptions& options) {
  const MsrStageProblem built = BuildMsrStageProblem(input);
  const StageProblem& p = built.problem;
  MsrStagePlan plan;
  plan.elements = p.num_elements;
  const StateSpace states = *StateSpace::ClassCounts(p.classes);
  // The best split of one topological order: an answer, and the bound that prunes the exact search.
  StageSplit split = engine::stages::SolveChain(p, states, engine::stages::DpOptions());
  plan.pairs_visited = split.pairs_visited;
  if (!options.chain_only) {
    const std::optional<IdealLattice> lattice = IdealLattice::Enumerate(p, options.max_ideals);
    if (lattice) {
      engine::stages::DpOptions bounded;
      bounded.upper_bound = split.objective;
      StageSplit exact = engine::stages::SolveIdeals(p, *lattice, states, bounded);
      plan.ideals = lattice->num_ideals();
      plan.pairs_visited += exact.pairs_visited;
      if (exact.objective <= split.objective) split = std::move(exact);
    }
  }
  plan.max_load = split.objective == kInfeasible ? std::numeric_limits<double>::infinity()
                                                 : static_cast<double>(split.objective) / kTimeScale;
  plan.device_of_node.assign(input.nodes.size(), -1);
  int32_t next_fpga = 1;
  for (const StageSplit::Stage& stage : split.stages) {
    const int32_t device = stage.klass == built.cpu_class ? 0 : next_fpga++;
    for (const int32_t e : stage.elements) {
      for (const int32_t node : built.members[e]) plan.device_of_node[node] = device;
    }
  }
  return plan;
}

std::string MsrStagePlan::ToJson(const MsrInput& input) const {
  int32_t fpgas = 0;
  for (const int32_t d : device_of_node) fpgas = std::max(fpgas, d);
  std::vector<std::vector<int64_t>> nodes(fpgas + 1);
  for (size_t i = 0; i < device_of_node.size(); ++i) {
    if (device_of_node[i] >= 0) nodes[device_of_node[i]].push_back(input.nodes[i].id);
  }
  json doc;
  doc["maxLoad"] = max_load;
  doc["cpus"] = json::array({json{{"load", -1}, {"nodes", nodes[0]}}});
  doc["fpgas"] = json::array();
  for (int32_t d = 1; d <= fpgas; ++d) doc["fpgas"].push_back(json{{"load", -1}, {"nodes", nodes[d]}});
  return doc.dump(1);
}

double MsrMaxLoad(const MsrInput& input, const std::vector<int32_t>& device_of_node) {
  std::map<int32_t, double> load;
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    const int32_t d = device_of_node[i];
    load[d] += d == 0 ? input.nodes[i].cpu_latency : input.nodes[i].fpga_latency;
  }
  std::vector<std::set<int32_t>> receivers(input.nodes.size());
  for (const MsrInput::Edge& e : input.edges) {
    if (device_of_node[e.dst] != device_of_node[e.src]) receivers[e.src].insert(device_of_node[e.dst]);
  }
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    if (receivers[i].empty()) continue;
    // Sent once by its device, received once by every other device that reads it; CPUs pay nothing.
    if (device_of_node[i] != 0) load[device_of_node[i]] += input.output_cost[i];
    for (const int32_t d : receivers[i]) {
      if (d != 0) load[d] += input.output_cost[i];
    }
  }
  double worst = 0;
  for (const auto& [device, value] : load) worst = std::max(worst, value);
  return worst;
}

bool MsrFeasible(const MsrInput& input, const std::vector<int32_t>& device_of_node) {
  std::map<int64_t, int32_t> device_of_color;
  std::map<int32_t, double> size;
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    const int32_t d = device_of_node[i];
    if (d < 0) return false;
    if (d != 0 && !input.nodes[i].on_fpga) return false;
    const auto [it, fresh] = device_of_color.emplace(input.nodes[i].color, d);
    if (!fresh && it->second != d) return false;
    if (d != 0) size[d] += input.nodes[i].size;
  }
  for (const auto& [device, bytes] : size) {
    if (bytes > input.max_size_per_fpga) return false;
  }
  return true;
}

absl::StatusOr<std::vector<int32_t>> ReadMsrSplit(const MsrInput& input, const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  absl::flat_hash_map<int64_t, int32_t> index_of_id;
  for (size_t i = 0; i < input.nodes.size(); ++i) index_of_id[input.nodes[i].id] = static_cast<int32_t>(i);
  std::vector<int32_t> device(input.nodes.size(), -1);
  try {
    json doc;
    file >> doc;
    auto take = [&](const json& machines, bool cpus) -> absl::Status {
      int32_t k = 0;
      for (const json& machine : machines) {
        ++k;
        for (const json& id : machine.at("nodes")) {
          const auto it = index_of_id.find(id.get<int64_t>());
          if (it == index_of_id.end()) return absl::InvalidArgumentError(absl::StrCat(path, ": unknown node ", id.dump()));
          device[it->second] = cpus ? 0 : k;
        }
      }
      return absl::OkStatus();
    };
    if (absl::Status s = take(doc.at("cpus"), true); !s.ok()) return s;
    if (absl::Status s = take(doc.at("fpgas"), false); !s.ok()) return s;
  } catch (const json::exception& error) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a split: ", error.what()));
  }
  // Complete by colorClass.
  std::map<int64_t, int32_t> device_of_color;
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    if (device[i] >= 0) device_of_color.emplace(input.nodes[i].color, device[i]);
  }
  for (size_t i = 0; i < input.nodes.size(); ++i) {
    if (device[i] >= 0) continue;
    const auto it = device_of_color.find(input.nodes[i].color);
    if (it != device_of_color.end()) device[i] = it->second;
  }
  return device;
}

}  // namespace placement::bench
