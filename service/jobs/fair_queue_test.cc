#include "service/jobs/fair_queue.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace placement::jobs {
namespace {

std::vector<int> PopAll(FairQueue<int>& queue) {
  std::vector<int> order;
  while (std::optional<int> item = queue.Pop()) order.push_back(*item);
  return order;
}

TEST(FairQueueTest, EmptyQueuePopsNothing) {
  FairQueue<int> queue;
  EXPECT_TRUE(queue.empty());
  EXPECT_FALSE(queue.Pop().has_value());
}

TEST(FairQueueTest, FifoWithinOneTenant) {
  FairQueue<int> queue;
  for (int i = 0; i < 5; ++i) queue.Push("a", i);
  EXPECT_EQ(queue.size(), 5u);
  EXPECT_EQ(PopAll(queue), (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(FairQueueTest, RoundRobinAcrossTenants) {
  FairQueue<int> queue;
  queue.Push("a", 1);
  queue.Push("a", 2);
  queue.Push("a", 3);
  queue.Push("b", 10);
  queue.Push("c", 20);
  queue.Push("b", 11);
  EXPECT_EQ(queue.tenant_count(), 3u);
  EXPECT_EQ(PopAll(queue), (std::vector<int>{1, 10, 20, 2, 11, 3}));
  EXPECT_EQ(queue.tenant_count(), 0u);
}

TEST(FairQueueTest, TenantRejoinsAtTheBackAfterEmptying) {
  FairQueue<int> queue;
  queue.Push("a", 1);
  queue.Push("b", 2);
  EXPECT_EQ(queue.Pop(), 1);
  queue.Push("a", 3);  // a was empty, so it queues behind b
  EXPECT_EQ(PopAll(queue), (std::vector<int>{2, 3}));
}

TEST(FairQueueTest, RemoveTakesOneItemOut) {
  FairQueue<int> queue;
  queue.Push("a", 1);
  queue.Push("b", 2);
  queue.Push("a", 3);
  EXPECT_TRUE(queue.Remove("a", 1));
  EXPECT_FALSE(queue.Remove("a", 1));
  EXPECT_FALSE(queue.Remove("zzz", 2));
  EXPECT_TRUE(queue.Remove("b", 2));
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(queue.size_of("a"), 1u);
  EXPECT_EQ(queue.size_of("b"), 0u);
  EXPECT_EQ(PopAll(queue), (std::vector<int>{3}));
}

TEST(FairQueueTest, DrainEmptiesEverything) {
  FairQueue<int> queue;
  queue.Push("a", 1);
  queue.Push("b", 2);
  queue.Push("a", 3);
  std::deque<int> all = queue.Drain();
  EXPECT_EQ(std::vector<int>(all.begin(), all.end()), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(queue.empty());
}

TEST(FairQueueTest, PopEligibleSkipsHeldBackTenantsWithoutLosingTheirTurn) {
  FairQueue<int> queue;
  queue.Push("a", 1);
  queue.Push("b", 2);
  queue.Push("a", 3);
  queue.Push("c", 4);
  auto not_a = [](const std::string& tenant) { return tenant != "a"; };
  EXPECT_TRUE(queue.HasEligible(not_a));
  EXPECT_EQ(queue.PopEligible(not_a), 2);
  EXPECT_EQ(queue.PopEligible(not_a), 4);
  EXPECT_FALSE(queue.HasEligible(not_a));
  EXPECT_FALSE(queue.PopEligible(not_a).has_value());
  EXPECT_EQ(queue.size(), 2u);
  // "a" kept its place at the front.
  EXPECT_EQ(queue.Pop(), 1);
  EXPECT_EQ(queue.Pop(), 3);
}

}  // namespace
}  // namespace placement::jobs
