// The bytes a SubmitPlacement hands the core: exactly the embedded PlaceRequest's, however gRPC split
// the message into slices, and none when the wrapper carries anything else.
#include "service/server/place_call.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

v1::PlaceRequest Request() {
  v1::PlaceRequest request;
  for (int i = 0; i < 300; ++i) request.mutable_graph()->add_ops()->set_name("op" + std::to_string(i));
  request.mutable_cluster()->add_devices()->set_name("gpu0");
  request.set_request_id("r-1");
  return request;
}

std::string Join(const std::vector<absl::string_view>& pieces) {
  std::string joined;
  for (absl::string_view piece : pieces) joined.append(piece.data(), piece.size());
  return joined;
}

// `bytes` cut into pieces of `size` bytes (the last one shorter).
std::vector<absl::string_view> Cut(const std::string& bytes, size_t size) {
  std::vector<absl::string_view> pieces;
  for (size_t at = 0; at < bytes.size(); at += size) {
    pieces.push_back(absl::string_view(bytes).substr(at, size));
  }
  return pieces;
}

TEST(SoleEmbeddedMessageTest, IsThePlaceRequestsOwnBytesWhateverTheSlicing) {
  v1::SubmitPlacementRequest submit;
  *submit.mutable_request() = Request();
  const std::string wire = submit.SerializeAsString();
  const std::string inner = submit.request().SerializeAsString();
  ASSERT_GT(inner.size(), 128u);  // a two-byte length
  for (size_t size : {1, 2, 3, 7, 64, 100000}) {
    EXPECT_EQ(Join(SoleEmbeddedMessage(Cut(wire, size), 1)), inner) << "pieces of " << size;
  }
}

TEST(SoleEmbeddedMessageTest, AnythingElseInTheWrapperGivesNoBytes) {
  v1::SubmitPlacementRequest submit;
  *submit.mutable_request() = Request();
  const std::string wire = submit.SerializeAsString();
  const std::string inner = submit.request().SerializeAsString();
  // Another field after it (field 2, varint 1): parsed, but not the PlaceRequest's bytes alone.
  EXPECT_TRUE(SoleEmbeddedMessage({wire + std::string("\x10\x01", 2)}, 1).empty());
  // Field 1 twice: protobuf merges the two, so neither piece is the request.
  EXPECT_TRUE(SoleEmbeddedMessage({wire + wire}, 1).empty());
  // Cut short, another field number, an empty body, a varint that never ends.
  EXPECT_TRUE(SoleEmbeddedMessage({wire.substr(0, wire.size() - 1)}, 1).empty());
  EXPECT_TRUE(SoleEmbeddedMessage({wire}, 2).empty());
  EXPECT_TRUE(SoleEmbeddedMessage({}, 1).empty());
  EXPECT_TRUE(SoleEmbeddedMessage({std::string(12, '\xff')}, 1).empty());
  EXPECT_EQ(Join(SoleEmbeddedMessage({wire}, 1)), inner);
}

}  // namespace
}  // namespace placement::server
