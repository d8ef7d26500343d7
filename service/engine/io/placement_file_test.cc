#include "service/engine/io/placement_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/io/message_io.h"

namespace placement::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Placement SamplePlacement() {
  v1::Placement placement;
  placement.add_device(1);
  placement.add_device(0);
  placement.add_device(1);
  placement.set_outcome(v1::FEASIBLE);
  placement.mutable_metrics()->set_makespan_ns(1155);
  placement.mutable_provenance()->set_algorithm("heft");
  return placement;
}

class PlacementFileTest : public ::testing::Test {
 protected:
  // A fresh path in the temp directory, removed after the test.
  std::string Path(const std::string& name) {
    paths_.push_back((std::filesystem::temp_directory_path() /
                      ("placement_file_test_" + std::to_string(::getpid()) + "_" + name))
                         .string());
    return paths_.back();
  }
  void TearDown() override {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }

 private:
  std::vector<std::string> paths_;
};

TEST_F(PlacementFileTest, ReadsABarePlacementOrOneInsideAResponse) {
  const v1::Placement placement = SamplePlacement();
  v1::PlaceResponse place_response;
  *place_response.mutable_placement() = placement;
  v1::EvaluateResponse evaluate_response;
  *evaluate_response.mutable_placement() = placement;
  evaluate_response.add_violations()->set_field("device[0]");
  for (const char* extension : {".json", ".json.gz"}) {
    const std::string bare = Path(std::string("bare") + extension);
    const std::string placed = Path(std::string("place") + extension);
    const std::string evaluated = Path(std::string("evaluate") + extension);
    ASSERT_TRUE(WriteMessageFile(placement, bare).ok());
    ASSERT_TRUE(WriteMessageFile(place_response, placed).ok());
    ASSERT_TRUE(WriteMessageFile(evaluate_response, evaluated).ok());
    for (const std::string& path : {bare, placed, evaluated}) {
      absl::StatusOr<v1::Placement> read = ReadPlacementFile(path);
      ASSERT_TRUE(read.ok()) << path << ": " << read.status();
      EXPECT_EQ(read->SerializeAsString(), placement.SerializeAsString()) << path;
    }
  }
}

TEST_F(PlacementFileTest, BinaryPlacementRoundTrips) {
  const std::string path = Path("bare.pb");
  ASSERT_TRUE(WriteMessageFile(SamplePlacement(), path).ok());
  absl::StatusOr<v1::Placement> read = ReadPlacementFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), SamplePlacement().SerializeAsString());
}

TEST_F(PlacementFileTest, SomethingElseIsAnErrorNamingTheFile) {
  const std::string path = Path("request.json");
  v1::PlaceRequest request;
  request.mutable_graph()->add_ops()->set_name("a");
  ASSERT_TRUE(WriteMessageFile(request, path).ok());
  absl::StatusOr<v1::Placement> read = ReadPlacementFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));

  absl::StatusOr<v1::Placement> missing = ReadPlacementFile(Path("missing.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("missing.json"));
}

// SamplePlacement answers a request with three ops on two devices: op i goes to device device(i).
v1::PlaceRequest SampleRequest() {
  v1::PlaceRequest request;
  for (const char* name : {"a", "b", "c"}) request.mutable_graph()->add_ops()->set_name(name);
  for (const char* name : {"gpu0", "gpu1"}) request.mutable_cluster()->add_devices()->set_name(name);
  return request;
}

TEST_F(PlacementFileTest, PreviousPlacementMapsOpNamesToDeviceNames) {
  const std::string placement_path = Path("previous.json");
  const std::string request_path = Path("previous_request.json");
  v1::PlaceResponse response;
  *response.mutable_placement() = SamplePlacement();
  ASSERT_TRUE(WriteMessageFile(response, placement_path).ok());
  ASSERT_TRUE(WriteMessageFile(SampleRequest(), request_path).ok());
  // The new cluster: gpu1 left, gpu2 joined.
  v1::Cluster cluster;
  for (const char* name : {"gpu0", "gpu2"}) cluster.add_devices()->set_name(name);
  v1::PlacementOptions options;
  options.add_departed_devices("stale");
  const absl::Status set = ReadPreviousPlacement(placement_path, request_path, cluster, &options);
  ASSERT_TRUE(set.ok()) << set;
  const auto& previous = options.previous_placement();
  EXPECT_EQ(previous.size(), 3u);
  EXPECT_EQ(previous.at("a"), "gpu1");
  EXPECT_EQ(previous.at("b"), "gpu0");
  EXPECT_EQ(previous.at("c"), "gpu1");
  EXPECT_THAT(options.departed_devices(), ElementsAre("gpu1"));
}

TEST_F(PlacementFileTest, PreviousPlacementThatDoesNotFitItsRequestIsAnError) {
  v1::PlaceRequest fewer_ops = SampleRequest();
  fewer_ops.mutable_graph()->mutable_ops()->RemoveLast();
  absl::StatusOr<google::protobuf::Map<std::string, std::string>> previous =
      PreviousPlacementOf(fewer_ops, SamplePlacement());
  ASSERT_FALSE(previous.ok());
  EXPECT_THAT(std::string(previous.status().message()), HasSubstr("3 devices for the previous request's 2 ops"));
  v1::PlaceRequest one_device = SampleRequest();
  one_device.mutable_cluster()->mutable_devices()->RemoveLast();
  previous = PreviousPlacementOf(one_device, SamplePlacement());
  ASSERT_FALSE(previous.ok());
  EXPECT_THAT(std::string(previous.status().message()), HasSubstr("device[0] = 1 is out of range"));

  const std::string placement_path = Path("bad_previous.json");
  const std::string request_path = Path("bad_previous_request.json");
  ASSERT_TRUE(WriteMessageFile(SamplePlacement(), placement_path).ok());
  ASSERT_TRUE(WriteMessageFile(one_device, request_path).ok());
  v1::PlacementOptions options;
  const absl::Status set = ReadPreviousPlacement(placement_path, request_path, one_device.cluster(), &options);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(std::string(set.message()), HasSubstr(placement_path));
  EXPECT_TRUE(options.previous_placement().empty());
}

}  // namespace
}  // namespace placement::engine
