#include "service/importers/import_options.h"

#include "absl/strings/str_cat.h"
#include "service/engine/io/message_io.h"

namespace placement::importers {

v1::Cluster DefaultCluster() {
  constexpr int kGpus = 4;
  constexpr int64_t kGiB = int64_t{1} << 30;
  v1::Cluster cluster;
  for (int i = 0; i < kGpus; ++i) {
    v1::Device* device = cluster.add_devices();
    device->set_name(absl::StrCat("gpu", i));
    device->set_kind("gpu");
    device->set_node("node0");
    device->set_memory_bytes(16 * kGiB);
    device->set_speed(1.0);
  }
  cluster.mutable_intra_node()->set_bandwidth_bytes_per_second(100'000'000'000);
  cluster.mutable_intra_node()->set_latency_ns(2'000);
  cluster.mutable_inter_node()->set_bandwidth_bytes_per_second(12'500'000'000);
  cluster.mutable_inter_node()->set_latency_ns(10'000);
  return cluster;
}

v1::Device DefaultCpuDevice() {
  v1::Device device;
  device.set_name("cpu0");
  device.set_kind("cpu");
  device.set_node("node0");
  device.set_memory_bytes(int64_t{64} << 30);
  device.set_speed(1.0);
  return device;
}

absl::StatusOr<v1::Cluster> ReadClusterFile(absl::string_view path) {
  v1::Cluster cluster;
  absl::Status status = engine::ReadMessageFile(path, cluster);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster file: ", status.message()));
  }
  if (cluster.devices_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cluster has no devices"));
  }
  return cluster;
}

}  // namespace placement::importers
