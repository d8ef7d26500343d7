#include "service/importers/wfcommons_importer.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "service/importers/import_util.h"

namespace placement::importers {
namespace {

using nlohmann::json;

absl::StatusOr<std::vector<std::string>> StringList(const JsonContext& ctx, const json& object,
                                                    const char* key, PathFn where) {
  std::vector<std::string> out;
  const json* list = JsonContext::Find(object, key);
  if (list == nullptr) return out;
  if (!list->is_array()) return ctx.Error(where, key, "expected an array of strings");
  out.reserve(list->size());
  for (const json& item : *list) {
    if (!item.is_string()) return ctx.Error(where, key, "expected an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

absl::StatusOr<v1::PlaceRequest> ImportWfCommonsText(absl::string_view path, absl::string_view text,
                                                     const ImportOptions& options) {
  absl::StatusOr<json> doc = ParseJson(path, text);
  if (!doc.ok()) return doc.status();
  const JsonContext ctx(path);
  auto root = [] { return std::string(); };

  absl::StatusOr<const json*> workflow = ctx.Object(*doc, "workflow", root);
  if (!workflow.ok()) return workflow.status();
  absl::StatusOr<const json*> spec =
      ctx.Object(**workflow, "specification", [] { return std::string("workflow"); });
  if (!spec.ok()) return spec.status();
  absl::StatusOr<const json*> execution =
      ctx.Object(**workflow, "execution", [] { return std::string("workflow"); });
  if (!execution.ok()) return execution.status();
  auto spec_path = [] { return std::string("workflow.specification"); };
  auto exec_path = [] { return std::string("workflow.execution"); };
  absl::StatusOr<const json*> tasks = ctx.Array(**spec, "tasks", spec_path);
  if (!tasks.ok()) return tasks.status();
  absl::StatusOr<const json*> files = ctx.Array(**spec, "files", spec_path);
  if (!files.ok()) return files.status();
  absl::StatusOr<const json*> runs = ctx.Array(**execution, "tasks", exec_path);
  if (!runs.ok()) return runs.status();

  absl::flat_hash_map<std::string, int64_t> file_bytes;
  for (size_t i = 0; i < (*files)->size(); ++i) {
    const json& file = (**files)[i];
    auto where = [i] { return IndexPath("workflow.specification.files", i); };
    absl::StatusOr<std::string> id = ctx.String(file, "id", where);
    if (!id.ok()) return id.status();
    absl::StatusOr<double> size = ctx.NumberOr(file, "sizeInBytes", 0.0, where);
    if (!size.ok()) return size.status();
    absl::StatusOr<int64_t> bytes = ToBytes(*size);
    if (!bytes.ok()) return ctx.Error(where, "sizeInBytes", bytes.status().message());
    file_bytes[*id] = *bytes;
  }
  auto bytes_of = [&](const std::string& file) -> int64_t {
    auto it = file_bytes.find(file);
    return it == file_bytes.end() ? 0 : it->second;
  };

  struct RunInfo {
    double runtime_s = 0;
    double memory = 0;
    std::string program;
  };
  absl::flat_hash_map<std::string, RunInfo> run_of_task;
  for (size_t i = 0; i < (*runs)->size(); ++i) {
    const json& run = (**runs)[i];
    auto where = [i] { return IndexPath("workflow.execution.tasks", i); };
    absl::StatusOr<std::string> id = ctx.String(run, "id", where);
    if (!id.ok()) return id.status();
    RunInfo info;
    absl::StatusOr<double> runtime = ctx.Number(run, "runtimeInSeconds", where);
    if (!runtime.ok()) return runtime.status();
    info.runtime_s = *runtime;
    absl::StatusOr<double> memory = ctx.NumberOr(run, "memoryInBytes", 0.0, where);
    if (!memory.ok()) return memory.status();
    info.memory = *memory;
    if (const json* command = JsonContext::Find(run, "command"); command != nullptr) {
      if (const json* program = JsonContext::Find(*command, "program");
          program != nullptr && program->is_string()) {
        info.program = program->get<std::string>();
      }
    }
    run_of_task[*id] = std::move(info);
  }

  v1::Graph graph;
  const size_t n = (*tasks)->size();
  graph.mutable_ops()->Reserve(static_cast<int>(n));
  absl::flat_hash_map<std::string, int32_t> op_of_task;
  std::vector<absl::flat_hash_set<std::string>> inputs_of(n);
  std::vector<std::vector<std::string>> outputs_of(n);
  std::vector<std::vector<std::string>> parents_of(n);
  for (size_t i = 0; i < n; ++i) {
    const json& task = (**tasks)[i];
    auto where = [i] { return IndexPath("workflow.specification.tasks", i); };
    absl::StatusOr<std::string> id = ctx.String(task, "id", where);
    if (!id.ok()) return id.status();
    if (!op_of_task.emplace(*id, static_cast<int32_t>(i)).second) {
      return ctx.Error(where, "id", absl::StrCat("duplicate task id '", *id, "'"));
    }
    auto run = run_of_task.find(*id);
    if (run == run_of_task.end()) {
      return ctx.Error(where, "id",
                       absl::StrCat("task '", *id, "' has no entry in workflow.execution.tasks"));
    }
    absl::StatusOr<int64_t> compute_ns = SecondsToNs(run->second.runtime_s);
    if (!compute_ns.ok()) return ctx.Error(where, "runtimeInSeconds", compute_ns.status().message());
    absl::StatusOr<int64_t> memory = ToBytes(run->second.memory);
    if (!memory.ok()) return ctx.Error(where, "memoryInBytes", memory.status().message());
    absl::StatusOr<std::vector<std::string>> inputs = StringList(ctx, task, "inputFiles", where);
    if (!inputs.ok()) return inputs.status();
    absl::StatusOr<std::vector<std::string>> outputs = StringList(ctx, task, "outputFiles", where);
    if (!outputs.ok()) return outputs.status();
    absl::StatusOr<std::vector<std::string>> parents = StringList(ctx, task, "parents", where);
    if (!parents.ok()) return parents.status();
    inputs_of[i].insert(inputs->begin(), inputs->end());
    outputs_of[i] = std::move(*outputs);
    parents_of[i] = std::move(*parents);

    v1::Op* op = graph.add_ops();
    op->set_name(*id);
    std::string type = run->second.program;
    if (type.empty()) type = id->substr(0, id->find('_'));
    op->set_type(type);
    op->set_compute_ns(*compute_ns);
    op->set_temp_bytes(*memory);
    int64_t output_bytes = 0;
    for (const std::string& file : outputs_of[i]) output_bytes += bytes_of(file);
    op->set_output_bytes(output_bytes);
  }

  for (size_t i = 0; i < n; ++i) {
    absl::flat_hash_set<int32_t> seen;
    for (const std::string& parent : parents_of[i]) {
      auto it = op_of_task.find(parent);
      if (it == op_of_task.end()) {
        return ctx.Error([i] { return IndexPath("workflow.specification.tasks", i); }, "parents",
                         absl::StrCat("unknown task '", parent, "'"));
      }
      if (!seen.insert(it->second).second) continue;  // listed twice: one edge
      int64_t bytes = 0;
      for (const std::string& file : outputs_of[it->second]) {
        if (inputs_of[i].contains(file)) bytes += bytes_of(file);
      }
      v1::Edge* edge = graph.add_edges();
      edge->set_src(it->second);
      edge->set_dst(static_cast<int32_t>(i));
      edge->set_bytes(bytes);
    }
  }
  return MakeRequest(std::move(graph), options.cluster.value_or(DefaultCluster()));
}

absl::StatusOr<v1::PlaceRequest> ImportWfCommons(absl::string_view path,
                                                 const ImportOptions& options) {
  absl::StatusOr<std::string> text = ReadInputFile(path);
  if (!text.ok()) return text.status();
  return ImportWfCommonsText(path, *text, options);
}

}  // namespace placement::importers
