#include "service/importers/pardnn_importer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/importers/import_util.h"

namespace placement::importers {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool IsFile(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The first of `names` (or name + ".gz") present in `folder`; empty when none is.
std::string FindFile(const std::string& folder, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    for (const char* suffix : {"", ".gz"}) {
      std::string candidate = absl::StrCat(folder, "/", name, suffix);
      if (IsFile(candidate)) return candidate;
    }
  }
  return "";
}

// The reference's line cleaning: drop spaces, tabs, CR and quotes.
std::string CleanLine(absl::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '"') out.push_back(c);
  }
  return out;
}

// Reads "name::integer" lines into `values`. Lines without "::" are skipped (headers, blank lines).
absl::Status ReadNameValues(const std::string& file, absl::flat_hash_map<std::string, int64_t>& values) {
  absl::StatusOr<std::string> text = ReadInputFile(file);
  if (!text.ok()) return text.status();
  const std::vector<absl::string_view> lines = SplitLines(*text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string line = CleanLine(lines[i]);
    std::vector<absl::string_view> parts = absl::StrSplit(line, "::");
    if (parts.size() != 2 || parts[0].empty()) continue;
    double value = 0;
    if (!absl::SimpleAtod(parts[1], &value)) {
      return FileError(file, static_cast<int64_t>(i) + 1,
                       absl::StrCat("'", parts[1], "' is not a number (expected name::value)"));
    }
    // -1 marks an unknown size in the reference's files; anything below is kept as "unknown" too.
    if (!std::isfinite(value) || value > 1e18) {
      return FileError(file, static_cast<int64_t>(i) + 1, absl::StrCat("'", parts[1], "' is out of range"));
    }
    values[std::string(parts[0])] = static_cast<int64_t>(std::max(value, -1.0));
  }
  return absl::OkStatus();
}

absl::Status ReadNames(const std::string& file, std::vector<std::string>& names) {
  absl::StatusOr<std::string> text = ReadInputFile(file);
  if (!text.ok()) return text.status();
  for (absl::string_view raw : SplitLines(*text)) {
    std::string line = CleanLine(raw);
    if (!line.empty()) names.push_back(std::move(line));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::PlaceRequest> ImportParDnn(absl::string_view path, const ImportOptions& options) {
  std::string folder(path);
  std::string graph_file;
  if (IsDirectory(folder)) {
    graph_file = FindFile(folder, {"crn_src_sink_low.dot", "graph.dot"});
    if (graph_file.empty()) {
      return FileError(path, 0,
                       "folder has neither crn_src_sink_low.dot nor graph.dot (ParDNN input folder "
                       "expected)");
    }
  } else if (IsFile(folder)) {
    graph_file = folder;
    const size_t slash = folder.rfind('/');
    folder = slash == std::string::npos ? "." : folder.substr(0, slash);
  } else {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or folder"));
  }

  // ---- Graph.
  absl::StatusOr<std::string> dot = ReadInputFile(graph_file);
  if (!dot.ok()) return dot.status();
  std::vector<std::string> names;
  absl::flat_hash_map<std::string, int32_t> index_of;
  auto intern = [&](absl::string_view name) -> int32_t {
    auto [it, inserted] = index_of.try_emplace(std::string(name), static_cast<int32_t>(names.size()));
    if (inserted) names.emplace_back(name);
    return it->second;
  };
  std::vector<std::pair<int32_t, int32_t>> edges;
  absl::flat_hash_set<std::pair<int32_t, int32_t>> seen_edges;
  {
    const std::vector<absl::string_view> lines = SplitLines(*dot);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string line = CleanLine(lines[i]);
      if (size_t bracket = line.find('['); bracket != std::string::npos) line.resize(bracket);
      absl::string_view view = line;
      absl::ConsumeSuffix(&view, ";");
      std::vector<absl::string_view> parts = absl::StrSplit(view, "->");
      if (parts.size() != 2) continue;  // digraph{, }, node declarations
      if (parts[0].empty() || parts[1].empty()) {
        return FileError(graph_file, static_cast<int64_t>(i) + 1, "edge with an empty node name");
      }
      if (parts[0] == "src" || parts[1] == "snk" || parts[0] == "snk" || parts[1] == "src") {
        // Pseudo nodes; still make a node that only touches src/snk exist.
        if (parts[0] != "src" && parts[0] != "snk") intern(parts[0]);
        if (parts[1] != "src" && parts[1] != "snk") intern(parts[1]);
        continue;
      }
      const int32_t a = intern(parts[0]);
      const int32_t b = intern(parts[1]);
      if (a == b) continue;
      if (seen_edges.insert({a, b}).second) edges.push_back({a, b});
    }
  }
  if (names.empty()) return FileError(graph_file, 0, "no 'A->B' edge lines found");
  const int32_t n = static_cast<int32_t>(names.size());

  // ---- Attribute files.
  absl::flat_hash_map<std::string, int64_t> durations, tensor_bytes, memory;
  if (std::string file = FindFile(folder, {"nodes_average_durations_fixed.txt", "weights.txt"});
      !file.empty()) {
    if (absl::Status s = ReadNameValues(file, durations); !s.ok()) return s;
  }
  if (std::string file = FindFile(folder, {"tensors_sz_32_low.txt", "costs.txt"}); !file.empty()) {
    if (absl::Status s = ReadNameValues(file, tensor_bytes); !s.ok()) return s;
  }
  if (std::string file = FindFile(folder, {"memory.txt"}); !file.empty()) {
    if (absl::Status s = ReadNameValues(file, memory); !s.ok()) return s;
  }
  enum Kind : uint8_t { kNormal, kVariable, kRefOp, kNoOp };
  std::vector<Kind> kind(n, kNormal);
  std::vector<std::string> var_order;
  for (auto [file_name, as] : {std::pair{"var_nodes.txt", kVariable}, std::pair{"ref_nodes.txt", kRefOp},
                               std::pair{"no_ops.txt", kNoOp}}) {
    std::string file = FindFile(folder, {file_name});
    if (file.empty()) continue;
    std::vector<std::string> listed;
    if (absl::Status s = ReadNames(file, listed); !s.ok()) return s;
    for (const std::string& name : listed) {
      auto it = index_of.find(name);
      if (it == index_of.end()) continue;  // lists cover the whole TF graph, the DOT only connected ops
      kind[it->second] = as;  // later files win, as in the reference
      if (as == kVariable) var_order.push_back(name);
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    if (absl::StartsWith(names[i], "^")) kind[i] = kNoOp;
  }
  std::vector<bool> cpu_only(n, false);
  if (std::string file = FindFile(folder, {"vanilla_cleaned.place"}); !file.empty()) {
    absl::StatusOr<std::string> text = ReadInputFile(file);
    if (!text.ok()) return text.status();
    const std::vector<absl::string_view> lines = SplitLines(*text);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::vector<absl::string_view> parts =
          absl::StrSplit(lines[i], absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (parts.size() != 2) continue;
      int device = 0;
      if (!absl::SimpleAtoi(parts[1], &device)) {
        return FileError(file, static_cast<int64_t>(i) + 1,
                         absl::StrCat("'", parts[1], "' is not a device index (expected 'name idx')"));
      }
      auto it = index_of.find(parts[0]);
      if (device == -1 && it != index_of.end()) cpu_only[it->second] = true;
    }
  }

  // ---- Ops.
  v1::Graph graph;
  graph.mutable_ops()->Reserve(n);
  auto lookup = [](const absl::flat_hash_map<std::string, int64_t>& map, const std::string& name,
                   int64_t fallback) {
    auto it = map.find(name);
    return it == map.end() ? fallback : it->second;
  };
  std::vector<int64_t> size_of(n, 0);
  bool any_cpu_only = false;
  for (int32_t i = 0; i < n; ++i) {
    const std::string& name = names[i];
    size_of[i] = std::max<int64_t>(0, lookup(tensor_bytes, name, 0));
    v1::Op* op = graph.add_ops();
    op->set_name(name);
    const int64_t us = std::max<int64_t>(0, lookup(durations, name, 1));
    op->set_compute_ns(us * 1000);
    const int64_t bytes = std::max<int64_t>(0, lookup(memory, name, size_of[i]));
    switch (kind[i]) {
      case kVariable:
        op->set_type("Variable");
        op->set_persistent_bytes(bytes);
        break;
      case kRefOp:
        op->set_type("RefOp");
        op->set_output_bytes(bytes);
        break;
      case kNoOp:
        op->set_type("NoOp");
        break;
      case kNormal:
        op->set_output_bytes(bytes);
        break;
    }
    if (cpu_only[i]) {
      op->add_allowed_kinds("cpu");
      any_cpu_only = true;
    }
  }

  std::vector<std::vector<int32_t>> children(n), parents(n);
  graph.mutable_edges()->Reserve(static_cast<int>(edges.size()));
  for (auto [a, b] : edges) {
    v1::Edge* edge = graph.add_edges();
    edge->set_src(a);
    edge->set_dst(b);
    edge->set_bytes(kind[a] == kNoOp || kind[b] == kNoOp ? 0 : size_of[a]);
    children[a].push_back(b);
    parents[b].push_back(a);
  }

  // ---- Colocation: the reference's BFS var -> ref children -> their var parents, plus var/read.
  std::vector<int32_t> group_of(n, -1);
  int32_t groups = 0;
  for (const std::string& var_name : var_order) {
    const int32_t root = index_of.at(var_name);
    if (group_of[root] >= 0 || kind[root] != kVariable) continue;
    std::vector<int32_t> members = {root};
    group_of[root] = groups;
    std::deque<int32_t> queue = {root};
    while (!queue.empty()) {
      const int32_t var = queue.front();
      queue.pop_front();
      for (int32_t child : children[var]) {
        const bool read_of_var = names[child] == absl::StrCat(names[var], "/read");
        if (group_of[child] >= 0 || (kind[child] != kRefOp && !read_of_var)) continue;
        group_of[child] = groups;
        members.push_back(child);
        if (kind[child] != kRefOp) continue;
        for (int32_t parent : parents[child]) {
          if (kind[parent] != kVariable || group_of[parent] >= 0) continue;
          group_of[parent] = groups;
          members.push_back(parent);
          queue.push_back(parent);
        }
      }
    }
    if (members.size() >= 2) {
      const std::string group = absl::StrCat("colo:", var_name);
      for (int32_t member : members) graph.mutable_ops(member)->set_colocation_group(group);
    }
    ++groups;
  }

  v1::Cluster cluster;
  if (options.cluster.has_value()) {
    cluster = *options.cluster;
    if (any_cpu_only) {
      bool has_cpu = false;
      for (const v1::Device& device : cluster.devices()) has_cpu |= device.kind() == "cpu";
      if (!has_cpu) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": vanilla_cleaned.place marks ops as CPU-only but the given cluster has no device "
                  "of kind \"cpu\""));
      }
    }
  } else {
    cluster = DefaultCluster();
    if (any_cpu_only) *cluster.add_devices() = DefaultCpuDevice();
  }
  return MakeRequest(std::move(graph), std::move(cluster));
}

}  // namespace placement::importers
