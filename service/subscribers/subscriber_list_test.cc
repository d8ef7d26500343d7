#include "service/subscribers/subscriber_list.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement {
namespace {

TEST(SubscriberListTest, CallsWhatWasTakenInOrderAndForgetsOnClear) {
  SubscriberList<const std::string&> list;
  std::vector<std::string> heard;
  const uint64_t first = list.Add([&](const std::string& s) { heard.push_back("1:" + s); });
  const uint64_t second = list.Add([&](const std::string& s) { heard.push_back("2:" + s); });
  EXPECT_NE(first, 0u);
  EXPECT_NE(first, second);

  SubscriberList<const std::string&>::Call(list.Take(/*clear=*/false), "a");
  EXPECT_EQ(heard, (std::vector<std::string>{"1:a", "2:a"}));
  EXPECT_FALSE(list.empty());

  list.Remove(first);
  list.Remove(0);       // ignored
  list.Remove(12345);   // ignored
  SubscriberList<const std::string&>::Call(list.Take(/*clear=*/true), "b");
  EXPECT_EQ(heard, (std::vector<std::string>{"1:a", "2:a", "2:b"}));
  EXPECT_TRUE(list.empty());
}

TEST(SubscriberListTest, ACallbackTakenBeforeItsRemovalStillRuns) {
  SubscriberList<> list;
  int calls = 0;
  const uint64_t id = list.Add([&] { ++calls; });
  SubscriberList<>::Taken taken = list.Take(/*clear=*/false);
  list.Remove(id);  // too late for `taken`: why callbacks must own what they touch
  SubscriberList<>::Call(taken);
  EXPECT_EQ(calls, 1);
  SubscriberList<>::Call(list.Take(/*clear=*/false));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace placement
