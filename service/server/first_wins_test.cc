#include "service/server/first_wins.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(FirstWinsTest, OnlyTheFirstClaimWins) {
  FirstWins first_wins;
  EXPECT_FALSE(first_wins.claimed());
  EXPECT_TRUE(first_wins.Claim());
  EXPECT_TRUE(first_wins.claimed());
  EXPECT_FALSE(first_wins.Claim());
  EXPECT_FALSE(first_wins.Claim());
}

TEST(FirstWinsTest, CopiesShareOneClaim) {
  FirstWins original;
  FirstWins copy = original;
  EXPECT_TRUE(copy.Claim());
  EXPECT_TRUE(original.claimed());
  EXPECT_FALSE(original.Claim());

  // Separately made ones do not.
  FirstWins other;
  EXPECT_TRUE(other.Claim());
}

TEST(FirstWinsTest, ACopyOutlivesTheOriginal) {
  auto original = std::make_unique<FirstWins>();
  FirstWins late_listener = *original;
  EXPECT_TRUE(original->Claim());
  original.reset();  // the reactor is gone; a late event must still lose, safely
  EXPECT_TRUE(late_listener.claimed());
  EXPECT_FALSE(late_listener.Claim());
}

// Done, cancel, drain and timeout racing from their own threads: exactly one wins, every time.
TEST(FirstWinsTest, ExactlyOneOfRacingThreadsWins) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  for (int round = 0; round < kRounds; ++round) {
    FirstWins first_wins;
    std::atomic<int> winners{0};
    absl::Barrier* start = new absl::Barrier(kThreads);  // deletes itself (Block returns true once)
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([first_wins, start, &winners]() mutable {
        if (start->Block()) delete start;
        if (first_wins.Claim()) winners.fetch_add(1);
      });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    EXPECT_TRUE(first_wins.claimed());
  }
}

}  // namespace
}  // namespace placement::server
