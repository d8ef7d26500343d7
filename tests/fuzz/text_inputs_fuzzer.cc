// text_inputs_fuzzer — libFuzzer target for the text the service parses besides graphs: request files in
// the protobuf JSON mapping (what placementctl and placement_offline read, through message_io, gzip
// included), the flag values of placement_server / placementctl / placement_offline (absl flag
// parsing of durations, integers, doubles, booleans), and the cgroup files the server reads to size its
// worker pool (cgroup v2 `cpu.max`, and cgroup v1 `cpu.cfs_quota_us` + `cpu.cfs_period_us`).
//
// The first input byte picks the parser; the rest is its input. What must hold: no crash, no sanitizer
// report; a parsed duration re-formats and parses back to itself (to the nanosecond); a worker count is positive.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/flags/marshalling.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/v1/placement.pb.h"
#include "service/engine/io/message_io.h"
#include "service/jobs/worker_count.h"

namespace {

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "text_inputs_fuzzer: violated: %s\n", what);
    std::abort();
  }
}

// A scratch file of this process for the file-reading paths (gzip detection is by content).
const std::string& ScratchFile() {
  static const std::string* path = [] {
    const char* tmp = std::getenv("TMPDIR");
    return new std::string(
        absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/placement_fuzz_text_", getpid(), ".json"));
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const absl::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string error;
  switch (selector % 9) {
    case 0: {  // JSON request text, as placementctl --request=FILE.json reads it
      placement::v1::PlaceRequest request;
      (void)placement::engine::JsonToMessage(input, request);
      break;
    }
    case 1: {  // a request file (JSON, or gzip-compressed JSON when the bytes say so)
      if (!placement::engine::WriteFileBytes(ScratchFile(), input).ok()) std::abort();
      (void)placement::engine::ReadMessageFile<placement::v1::PlaceRequest>(ScratchFile());
      break;
    }
    case 2: {  // --time_limit=, --timeout=, --retry_delay=, ...
      absl::Duration d;
      if (absl::ParseFlag<absl::Duration>(input, &d, &error)) {
        absl::Duration again;
        Check(absl::ParseFlag<absl::Duration>(absl::UnparseFlag<absl::Duration>(d), &again, &error),
              "duration does not re-parse");
        // Durations count quarter nanoseconds; the text form may round below a nanosecond.
        Check(again == d || absl::AbsDuration(again - d) < absl::Nanoseconds(1),
              "duration changed through UnparseFlag");
      }
      break;
    }
    case 3: {  // --port=, --workers=, --max_message_bytes=
      int value;
      (void)absl::ParseFlag(input, &value, &error);
      break;
    }
    case 4: {  // --cache_bytes=, --job_memory_budget_bytes=
      int64_t value;
      (void)absl::ParseFlag(input, &value, &error);
      break;
    }
    case 5: {  // --miss_fraction= (placement_load), headroom flags
      double value;
      (void)absl::ParseFlag(input, &value, &error);
      break;
    }
    case 6: {  // --testing_algorithms=, --log_requests=
      bool value;
      (void)absl::ParseFlag(input, &value, &error);
      break;
    }
    case 7: {  // /sys/fs/cgroup/cpu.max
      std::optional<int> limit = placement::jobs::CpuLimitFromCpuMax(input);
      if (limit.has_value()) Check(*limit > 0, "CPU limit not positive");
      break;
    }
    case 8: {  // cgroup v1: cpu.cfs_quota_us, a newline, cpu.cfs_period_us
      const size_t newline = input.find('\n');
      std::optional<int> limit = placement::jobs::CpuLimitFromCfs(
          input.substr(0, newline),
          newline == absl::string_view::npos ? absl::string_view() : input.substr(newline + 1));
      if (limit.has_value()) Check(*limit > 0, "CPU limit not positive");
      break;
    }
  }
  return 0;
}
