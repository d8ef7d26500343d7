// operation_reactors.h — WaitOperation and WatchOperation: calls that follow an operation.
//
//   WaitOperation    finishes, with the operation's current state, when whichever comes first: the
//                    operation is done, its timeout (capped by the call's deadline and
//                    max_wait_timeout) passes, or the server drains (first_wins.h decides, once); a
//                    caller that cancels gets CANCELLED.
//   WatchOperation   streams the operation: the current state at once, then every change (at most one
//                    write in flight; changes during a write are merged), the last message done; a
//                    drain ends it UNAVAILABLE.
//
// Example (PlacementServiceImpl's handler):
//   grpc::ServerUnaryReactor* PlacementServiceImpl::WaitOperation(context, request, response) {
//     return StartWaitOperationCall(this, context, request, response);
//   }
#ifndef PLACEMENT_SERVICE_SERVER_OPERATION_REACTORS_H_
#define PLACEMENT_SERVICE_SERVER_OPERATION_REACTORS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "service/server/placement_service.h"

namespace placement::server {

// The reactor of one WaitOperation call.
grpc::ServerUnaryReactor* StartWaitOperationCall(PlacementServiceImpl* service,
                                                 grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response);

// The reactor of one WatchOperation call (a server stream of v1::WatchOperationResponse).
grpc::ServerWriteReactor<grpc::ByteBuffer>* StartWatchOperationCall(
    PlacementServiceImpl* service, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_OPERATION_REACTORS_H_
