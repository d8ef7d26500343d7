#include "service/engine/io/message_io.h"

#include <cstdio>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/v1/placement.pb.h"

namespace placement::engine {
namespace {

using ::testing::HasSubstr;

v1::PlaceRequest SmallRequest() {
  v1::PlaceRequest request;
  v1::Op* a = request.mutable_graph()->add_ops();
  a->set_name("a");
  a->set_compute_ns(1500);
  a->set_output_bytes(int64_t{1} << 40);
  v1::Op* b = request.mutable_graph()->add_ops();
  b->set_name("b");
  v1::Edge* edge = request.mutable_graph()->add_edges();
  edge->set_src(0);
  edge->set_dst(1);
  edge->set_bytes(77);
  v1::Device* gpu = request.mutable_cluster()->add_devices();
  gpu->set_name("gpu0");
  gpu->set_memory_bytes(1000);
  gpu->set_speed(1.5);
  return request;
}

class MessageIoTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) {
    return (std::filesystem::temp_directory_path() /
            (std::to_string(::getpid()) + "_" + name)).string();
  }
};

TEST_F(MessageIoTest, RoundTripsEveryFormat) {
  const v1::PlaceRequest request = SmallRequest();
  for (const char* name : {"r.json", "r.json.gz", "r.pb", "r.pb.gz"}) {
    const std::string path = Path(name);
    ASSERT_TRUE(WriteMessageFile(request, path).ok()) << name;
    absl::StatusOr<v1::PlaceRequest> back = ReadMessageFile<v1::PlaceRequest>(path);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(back->SerializeAsString(), request.SerializeAsString()) << name;
    std::remove(path.c_str());
  }
}

TEST_F(MessageIoTest, GzipFilesAreReallyCompressed) {
  const std::string path = Path("c.json.gz");
  ASSERT_TRUE(WriteMessageFile(SmallRequest(), path).ok());
  std::FILE* file = std::fopen(path.c_str(), "rb");
  ASSERT_NE(file, nullptr);
  const int first = std::fgetc(file);
  const int second = std::fgetc(file);
  std::fclose(file);
  EXPECT_EQ(first, 0x1f);
  EXPECT_EQ(second, 0x8b);
  std::remove(path.c_str());
}

TEST_F(MessageIoTest, JsonUsesProtoFieldNames) {
  const std::string json = MessageToJson(SmallRequest(), /*compact=*/true);
  EXPECT_THAT(json, HasSubstr("\"compute_ns\":\"1500\""));
  EXPECT_THAT(json, HasSubstr("\"memory_bytes\":\"1000\""));
}

TEST_F(MessageIoTest, ReportsMissingFileWithItsName) {
  absl::StatusOr<v1::PlaceRequest> read = ReadMessageFile<v1::PlaceRequest>(Path("missing.json"));
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("missing.json"));
}

TEST_F(MessageIoTest, RejectsUnknownJsonFieldsAndNamesTheFile) {
  const std::string path = Path("bad.json");
  ASSERT_TRUE(WriteFileBytes(path, R"({"graph": {"opz": []}})").ok());
  absl::StatusOr<v1::PlaceRequest> read = ReadMessageFile<v1::PlaceRequest>(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("bad.json"));
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("opz"));
  std::remove(path.c_str());
}

TEST_F(MessageIoTest, RejectsTruncatedGzip) {
  const std::string good = Path("t.json.gz");
  ASSERT_TRUE(WriteMessageFile(SmallRequest(), good).ok());
  absl::StatusOr<std::string> bytes = ReadFileBytes(good);  // gunzipped
  ASSERT_TRUE(bytes.ok());
  // Re-read the raw compressed bytes and cut them in half.
  std::FILE* file = std::fopen(good.c_str(), "rb");
  std::string raw(4096, '\0');
  raw.resize(std::fread(raw.data(), 1, raw.size(), file));
  std::fclose(file);
  const std::string cut = Path("cut.json.gz");
  ASSERT_TRUE(WriteFileBytes(Path("cut.bin"), raw.substr(0, raw.size() / 2)).ok());
  std::rename(Path("cut.bin").c_str(), cut.c_str());
  absl::StatusOr<v1::PlaceRequest> read = ReadMessageFile<v1::PlaceRequest>(cut);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("gzip"));
  std::remove(good.c_str());
  std::remove(cut.c_str());
}

TEST_F(MessageIoTest, RejectsGarbageBinary) {
  const std::string path = Path("g.pb");
  ASSERT_TRUE(WriteFileBytes(path, std::string("\xff\xff\xff\xff\x0f", 5)).ok());
  EXPECT_FALSE(ReadMessageFile<v1::PlaceRequest>(path).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace placement::engine
