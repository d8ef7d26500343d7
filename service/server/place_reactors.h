// place_reactors.h — Place, Evaluate and Recommend: unary calls that wait for jobs on the workers.
//
// The reactor asks the core once (on gRPC's thread, or on the service's offload pool
// when a shared cache tier is configured), then waits for the job without blocking any thread.
// Whichever comes first finishes the call, exactly once (first_wins.h): the job done, the caller
// cancelled (or its deadline passed), or the end of the shutdown grace (UNAVAILABLE); a caller that
// goes away releases the job, which stops only when nobody else waits for it.
//
// Example (PlacementServiceImpl's handler):
//   grpc::ServerUnaryReactor* PlacementServiceImpl::Place(context, request, response) {
//     return StartPlaceCall(this, context, request, response);
//   }
#ifndef PLACEMENT_SERVICE_SERVER_PLACE_REACTORS_H_
#define PLACEMENT_SERVICE_SERVER_PLACE_REACTORS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "service/server/placement_service.h"

namespace placement::server {

// The reactor of one Place call (v1::PlaceRequest → v1::PlaceResponse).
grpc::ServerUnaryReactor* StartPlaceCall(PlacementServiceImpl* service,
                                         grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response);

// The reactor of one Evaluate call (v1::EvaluateRequest → v1::EvaluateResponse).
grpc::ServerUnaryReactor* StartEvaluateCall(PlacementServiceImpl* service,
                                            grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response);

// The reactor of one Recommend call (v1::RecommendRequest → v1::RecommendResponse): it waits for every
// candidate the cache could not answer.
grpc::ServerUnaryReactor* StartRecommendCall(PlacementServiceImpl* service,
                                             grpc::CallbackServerContext* context,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response);

}  // namespace placement::server

#endif  // PLACEMENT_SERVICE_SERVER_PLACE_REACTORS_H_
