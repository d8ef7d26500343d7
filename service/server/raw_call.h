// raw_call.h — what every PlacementService call does around its own work, shared by the servicer
// (placement_service.cc) and the reactors (place_reactors.h, operation_reactors.h).
//
// Every method is registered on gRPC's raw (ByteBuffer) API. Open() authenticates the caller from its
// metadata (and charges its rate), reserves the decoded size in the DecodingBudget, then decodes the
// body — Place and SubmitPlacement only when the core asks for it (a byte-identical repeat is answered
// from the bytes); the CallRecord it is given owns the request and response, encodes the response
// when the call finishes, and reports the call (metrics + one log line).
//
// Example:
//   CallRecord record(service, Method::kGetOperation);
//   auto exchange = Open<v1::GetOperationRequest, v1::GetOperationResponse>(service, context,
//                                                                           request, response, record);
//   if (!exchange.ok()) return finish(record.Done(exchange.status()));
//   ... fill (*exchange)->response ...
//   reactor->Finish(ToGrpcStatus(record.Done(absl::OkStatus())));
#ifndef PLACEMENT_SERVICE_SERVER_RAW_CALL_H_
#define PLACEMENT_SERVICE_SERVER_RAW_CALL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/status_payloads/status_payloads.h"
#include "service/server/placement_service.h"
#include "service/server/request_log.h"
#include "service/server/service_metrics.h"

namespace placement::server {

// Times one call and reports it (metrics + one log line) when it ends.
class CallRecord {
 public:
  CallRecord(PlacementServiceImpl* service, Method method);
  RpcLogEntry& entry() { return entry_; }
  // Runs in Done(), before the call is finished: encodes the response (raw API), may replace an OK
  // status by the encoding's failure.
  void set_before_finish(std::function<absl::Status(const absl::Status&)> before_finish) {
    before_finish_ = std::move(before_finish);
  }
  // Records the call and returns the status to finish it with.
  absl::Status Done(absl::Status status);

 private:
  PlacementServiceImpl* service_;
  absl::Time start_;
  RpcLogEntry entry_;
  std::function<absl::Status(const absl::Status&)> before_finish_;
};

// The caller's deadline (InfiniteFuture when it set none).
absl::Time DeadlineOf(const grpc::CallbackServerContext* context);

// Reserves a request's decoded size in the service's DecodingBudget: UNAVAILABLE + RetryInfo (and
// counted) when the calls being decoded already hold it.
absl::Status ReserveDecoding(PlacementServiceImpl* service, int64_t bytes);

template <typename Message>
absl::Status Decode(const grpc::ByteBuffer& in, Message* out) {
  grpc::ByteBuffer copy(in);  // shares the slices; Deserialize consumes its argument
  if (!grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request body (", in.Length(), " bytes) does not parse as a ",
        Message::descriptor()->full_name(), " message"));
  }
  return absl::OkStatus();
}

// A call's request (its body as received, decoded when needed) and its response, owned by the call
// (through its CallRecord).
template <typename Request, typename Response>
struct Exchange {
  Request request;
  Response response;

  Exchange(PlacementServiceImpl* service, const grpc::ByteBuffer* body)
      : service(service), body(body) {}
  ~Exchange() { DropRequest(); }

  // The body's bytes in pieces, as gRPC received them (not copied; valid while the call lasts).
  std::vector<absl::string_view> Wire() {
    std::vector<absl::string_view> pieces;
    if (body == nullptr || !body->Dump(&slices).ok()) return pieces;
    pieces.reserve(slices.size());
    for (const grpc::Slice& slice : slices) {
      pieces.emplace_back(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
    return pieces;
  }

  // Reserves the decoded size in the decoding budget, then decodes the body into `request`; later
  // calls return the first one's outcome.
  absl::Status Decode() {
    if (!decoded.has_value()) decoded = ReserveAndDecode();
    return *decoded;
  }

  // Frees the decoded request (and its share of the decoding budget) once the call no longer needs it,
  // e.g. while it waits for its job: the job holds the model, not the message.
  void DropRequest() {
    Request().Swap(&request);
    slices.clear();
    if (budget != nullptr) budget->Release(reserved);
    budget = nullptr;
  }

  absl::Status ReserveAndDecode() {
    const int64_t estimate = static_cast<int64_t>(body->Length()) * kDecodedBytesPerWireByte;
    if (absl::Status reserved_now = ReserveDecoding(service, estimate); !reserved_now.ok()) {
      return reserved_now;
    }
    budget = &service->decoding();
    reserved = estimate;
    return server::Decode(*body, &request);
  }

  PlacementServiceImpl* const service;
  const grpc::ByteBuffer* const body;
  std::vector<grpc::Slice> slices;  // Wire()'s pieces
  std::optional<absl::Status> decoded;  // Decode()'s outcome, once it ran
  DecodingBudget* budget = nullptr;
  int64_t reserved = 0;
};

template <typename Message>
absl::Status Encode(const Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  out->Clear();  // gRPC's serializer requires an empty buffer (a stream reuses one)
  if (!grpc::SerializationTraits<Message>::Serialize(message, out, &own_buffer).ok()) {
    return absl::InternalError("cannot encode the response");
  }
  return absl::OkStatus();
}

// When Open decodes the body: at once (most calls), or only when the core asks for it (Place and
// SubmitPlacement, whose byte-identical repeats are answered from the bytes).
enum class Decoding { kNow, kOnDemand };

// What every raw handler does first: the caller is authenticated (and its rate charged) from its
// metadata alone; only then is the body decoded, within the decoding budget. On success the exchange
// is owned by `record`, which encodes the response into `out` when the call finishes; on failure the
// status to finish the call with.
template <typename Request, typename Response>
absl::StatusOr<std::shared_ptr<Exchange<Request, Response>>> Open(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
    grpc::ByteBuffer* out, CallRecord& record, Decoding decoding = Decoding::kNow) {
  absl::StatusOr<std::string> tenant = service->Admit(context);
  if (!tenant.ok()) return tenant.status();
  record.entry().tenant = *tenant;
  auto exchange = std::make_shared<Exchange<Request, Response>>(service, in);
  if (decoding == Decoding::kNow) {
    if (absl::Status decoded = exchange->Decode(); !decoded.ok()) return decoded;
  }
  if (out != nullptr) {
    record.set_before_finish([exchange, out](const absl::Status& status) -> absl::Status {
      if (!status.ok()) return status;
      return Encode(exchange->response, out);
    });
  } else {
    record.set_before_finish([exchange](const absl::Status& status) { return status; });
  }
  return exchange;
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_RAW_CALL_H_
