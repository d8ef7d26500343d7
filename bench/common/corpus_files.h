// corpus_files.h — what the benchmark tools share about a corpus of requests on disk: finding the
// request files under a folder, naming a case after its file, and resizing a request's cluster to K
// accelerators.
//
// Example:
//   std::vector<std::string> paths;
//   FindRequests("build/corpus", paths);  // *.json, *.json.gz, *.pb, *.pb.gz, recursively
//   std::sort(paths.begin(), paths.end());
//   const std::string name = CaseName("build/corpus", paths[0]);  // path relative, no extension
#ifndef PLACEMENT_BENCH_COMMON_CORPUS_FILES_H_
#define PLACEMENT_BENCH_COMMON_CORPUS_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "placement/v1/placement.pb.h"

namespace placement::bench {

// True for the request file names every tool reads.
bool IsRequestFile(const std::string& name);

// Appends every request file under `dir` (recursively) to `out`, in directory order.
void FindRequests(const std::string& dir, std::vector<std::string>& out);

// `path` relative to `corpus`, without its extension.
std::string CaseName(const std::string& corpus, const std::string& path);

// The request with K accelerators: the most common device kind is the accelerator; the first K of the
// request's accelerators are kept as they are, more are cloned from the first one (four per node, so K = 8
// spans two nodes and uses the inter-node link); devices of other kinds (e.g. a host CPU some ops need)
// are kept. Pins to dropped accelerators move to accelerator (index mod K); link overrides between kept
// devices are kept. `memory_bytes` > 0 replaces every accelerator's memory.
v1::PlaceRequest ResizeCluster(const v1::PlaceRequest& request, int32_t k, int64_t memory_bytes);

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_COMMON_CORPUS_FILES_H_
