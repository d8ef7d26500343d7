#include "bench/common/corpus_files.h"

#include <sys/stat.h>
#include <dirent.h>

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace placement::bench {

bool IsRequestFile(const std::string& name) {
  return absl::EndsWith(name, ".json") || absl::EndsWith(name, ".json.gz") || absl::EndsWith(name, ".pb") ||
         absl::EndsWith(name, ".pb.gz");
}

void FindRequests(const std::string& dir, std::vector<std::string>& out) {
  DIR* handle = opendir(dir.c_str());
  if (handle == nullptr) return;
  while (dirent* entry = readdir(handle)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat info {};
    if (stat(path.c_str(), &info) != 0) continue;
    if (S_ISDIR(info.st_mode)) {
      FindRequests(path, out);
    } else if (IsRequestFile(name)) {
      out.push_back(path);
    }
  }
  closedir(handle);
}

std::string CaseName(const std::string& corpus, const std::string& path) {
  std::string name = path;
  if (absl::StartsWith(name, corpus + "/")) name = name.substr(corpus.size() + 1);
  for (const char* ext : {".json.gz", ".pb.gz", ".json", ".pb"}) {
    if (absl::EndsWith(name, ext)) {
      name.resize(name.size() - std::string(ext).size());
      break;
    }
  }
  return name;
}

v1::PlaceRequest ResizeCluster(const v1::PlaceRequest& request, int32_t k, int64_t memory_bytes) {
  v1::PlaceRequest out = request;
  const v1::Cluster& cluster = request.cluster();
  std::map<std::string, int> kind_count;
  std::string accelerator_kind;
  int best = 0;
  for (const v1::Device& device : cluster.devices()) {
    const int count = ++kind_count[device.kind()];
    if (count > best) {
      best = count;
      accelerator_kind = device.kind();
    }
  }
  std::vector<const v1::Device*> accelerators, others;
  for (const v1::Device& device : cluster.devices()) {
    (device.kind() == accelerator_kind ? accelerators : others).push_back(&device);
  }
  v1::Cluster* resized = out.mutable_cluster();
  resized->clear_devices();
  std::map<std::string, std::string> renamed;  // dropped accelerator -> kept one
  std::map<std::string, bool> taken;
  for (const v1::Device* device : others) taken[device->name()] = true;
  for (int32_t i = 0; i < k && i < static_cast<int32_t>(accelerators.size()); ++i) {
    taken[accelerators[i]->name()] = true;
  }
  std::vector<std::string> names;
  for (int32_t i = 0; i < k; ++i) {
    v1::Device* device = resized->add_devices();
    if (i < static_cast<int32_t>(accelerators.size())) {
      *device = *accelerators[i];
    } else {
      *device = *accelerators.front();
      std::string name = absl::StrCat(accelerator_kind, i);
      while (taken[name]) name += "_";
      taken[name] = true;
      device->set_name(name);
      device->set_node(absl::StrCat("node", i / 4));
    }
    if (memory_bytes > 0) device->set_memory_bytes(memory_bytes);
    names.push_back(device->name());
  }
  for (int32_t i = k; i < static_cast<int32_t>(accelerators.size()); ++i) {
    renamed[accelerators[i]->name()] = names[i % k];
  }
  for (const v1::Device* device : others) *resized->add_devices() = *device;
  resized->clear_links();
  for (const v1::Link& link : cluster.links()) {
    if (taken[link.a()] && taken[link.b()] && !renamed.count(link.a()) && !renamed.count(link.b())) {
      *resized->add_links() = link;
    }
  }
  for (v1::Op& op : *out.mutable_graph()->mutable_ops()) {
    auto it = renamed.find(op.pinned_device());
    if (it != renamed.end()) op.set_pinned_device(it->second);
  }
  return out;
}

}  // namespace placement::bench
