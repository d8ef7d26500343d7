#include "service/cache/canonical_order.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement::cache {
namespace {

// A graph of ops named a, b, c, d (canonical ids 0..3) sent in two different orders.
// First caller: graph.ops = [c, a, d, b] → request_index (canonical → request) = a:1, b:3, c:0, d:2.
const std::vector<int32_t> kFirstOrder = {1, 3, 0, 2};
// Second caller: graph.ops = [d, c, b, a] → a:3, b:2, c:1, d:0.
const std::vector<int32_t> kSecondOrder = {3, 2, 1, 0};

TEST(CanonicalOrderTest, RoundTripsAndMapsToAnotherCallersOrder) {
  // The first caller's answer: c→0, a→1, d→1, b→0 in its own order.
  v1::Placement first;
  for (int32_t d : {0, 1, 1, 0}) first.add_device(d);
  first.set_outcome(v1::FEASIBLE);
  first.mutable_metrics()->set_makespan_ns(123);
  first.mutable_provenance()->set_request_digest("abc");

  std::shared_ptr<const v1::Placement> canonical = ToCanonicalOrder(first, kFirstOrder);
  // Canonical: a, b, c, d.
  EXPECT_EQ(std::vector<int32_t>(canonical->device().begin(), canonical->device().end()),
            (std::vector<int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(canonical->metrics().makespan_ns(), 123);
  EXPECT_EQ(canonical->provenance().request_digest(), "abc");

  v1::Placement back = ToRequestOrder(*canonical, kFirstOrder);
  EXPECT_EQ(back.SerializeAsString(), first.SerializeAsString());

  // The second caller's order is d, c, b, a.
  v1::Placement second = ToRequestOrder(*canonical, kSecondOrder);
  EXPECT_EQ(std::vector<int32_t>(second.device().begin(), second.device().end()),
            (std::vector<int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(second.outcome(), v1::FEASIBLE);
}

// Every field of Placement set (through reflection, so a field added later is covered too): both
// directions carry all of them but `device`, which they reorder.
TEST(CanonicalOrderTest, EveryFieldButTheDevicesIsCarried) {
  v1::Placement full;
  for (int32_t d : {0, 1, 1, 0}) full.add_device(d);
  const google::protobuf::Descriptor* descriptor = full.GetDescriptor();
  const google::protobuf::Reflection* reflection = full.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    if (field->name() == "device") continue;
    switch (field->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE:
        // A message with a field set is present; its first field is enough to tell it was copied.
        reflection->MutableMessage(&full, field)->ParseFromString(std::string("\x08\x07", 2));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_ENUM:
        reflection->SetEnumValue(&full, field, 1);
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_STRING:
        reflection->SetString(&full, field, "set");
        break;
      default:
        FAIL() << "Placement." << field->name() << " has a type this test does not set";
    }
  }
  std::shared_ptr<const v1::Placement> canonical = ToCanonicalOrder(full, kFirstOrder);
  v1::Placement back = ToRequestOrder(*canonical, kFirstOrder);
  EXPECT_EQ(back.SerializeAsString(), full.SerializeAsString());
}

TEST(CanonicalOrderTest, ReusesTheOutputMessage) {
  v1::Placement canonical;
  for (int32_t d : {5, 6, 7, 8}) canonical.add_device(d);
  v1::Placement out;
  out.set_reason("stale");
  for (int i = 0; i < 10; ++i) out.add_device(9);
  ToRequestOrder(canonical, kSecondOrder, &out);
  EXPECT_EQ(std::vector<int32_t>(out.device().begin(), out.device().end()),
            (std::vector<int32_t>{8, 7, 6, 5}));
  EXPECT_EQ(out.reason(), "");
}

TEST(CanonicalOrderDeathTest, SizeMismatchIsABug) {
  v1::Placement wrong;
  wrong.add_device(0);
  EXPECT_DEATH(ToCanonicalOrder(wrong, kFirstOrder), "model has 4 ops");
}

}  // namespace
}  // namespace placement::cache
