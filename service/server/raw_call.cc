#include "service/server/raw_call.h"

#include <chrono>
#include <utility>

#include "absl/time/clock.h"

namespace placement::server {

CallRecord::CallRecord(PlacementServiceImpl* service, Method method)
    : service_(service), start_(absl::Now()) {
  entry_.method = method;
}

absl::Status CallRecord::Done(absl::Status status) {
  if (before_finish_) status = before_finish_(status);
  before_finish_ = nullptr;  // drops the request and response it owned
  entry_.code = status.code();
  if (!status.ok()) entry_.message = std::string(status.message());
  entry_.total_time = absl::Now() - start_;
  service_->Record(entry_);
  return status;
}

absl::Status ReserveDecoding(PlacementServiceImpl* service, int64_t bytes) {
  if (service->decoding().TryReserve(bytes)) return absl::OkStatus();
  if (service->metrics() != nullptr) service->metrics()->RecordDecodingRejected();
  return status_payloads::WithRetryDelay(
      absl::UnavailableError(absl::StrCat(
          "the server is decoding other large requests (--max_decoding_bytes=",
          service->options().max_decoding_bytes, " would be exceeded); retry later")),
      service->options().retry_delay);
}

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  const std::chrono::system_clock::time_point deadline = context->deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

}  // namespace placement::server
