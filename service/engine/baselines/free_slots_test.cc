#include "service/engine/baselines/free_slots.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace placement::engine::baselines {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

TEST(FreeSlotsTest, EmptyDeviceStartsAtOnce) {
  FreeSlots slots;
  EXPECT_EQ(slots.EarliestStart(0, 10), 0);
  EXPECT_EQ(slots.EarliestStart(123, 10), 123);
  EXPECT_EQ(slots.size(), 1);
}

TEST(FreeSlotsTest, UsesAGapThatIsLongEnoughAndSkipsOneThatIsNot) {
  FreeSlots slots;
  slots.Occupy(100, 50);  // busy [100, 150)
  slots.Occupy(170, 30);  // busy [170, 200)
  EXPECT_EQ(slots.size(), 3);  // [0,100) [150,170) [200,end)
  EXPECT_EQ(slots.EarliestStart(0, 100), 0);
  EXPECT_EQ(slots.EarliestStart(0, 101), 200);
  EXPECT_EQ(slots.EarliestStart(140, 20), 150);
  EXPECT_EQ(slots.EarliestStart(140, 21), 200);
  EXPECT_EQ(slots.EarliestStart(155, 15), 155);
  EXPECT_EQ(slots.EarliestStart(155, 16), 200);
  EXPECT_EQ(slots.EarliestStart(120, 0), 150);  // a zero-length run inside a busy period waits for it
}

TEST(FreeSlotsTest, OccupyingAWholeGapRemovesIt) {
  FreeSlots slots;
  slots.Occupy(10, 10);
  slots.Occupy(0, 10);
  EXPECT_EQ(slots.size(), 1);
  EXPECT_EQ(slots.EarliestStart(0, 1), 20);
}

// Against a brute-force list of busy intervals.
TEST(FreeSlotsTest, MatchesBruteForceOnRandomSchedules) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; ++round) {
    FreeSlots slots;
    std::vector<std::pair<int64_t, int64_t>> busy;  // sorted [from, until)
    for (int step = 0; step < 300; ++step) {
      const int64_t t = static_cast<int64_t>(rng() % 5000);
      const int64_t w = static_cast<int64_t>(rng() % 60);
      // Brute force: earliest s >= t with [s, s+w) free (s inside a free period).
      int64_t expected = t;
      for (;;) {
        bool moved = false;
        for (const auto& [from, until] : busy) {
          const bool overlaps = w == 0 ? (from <= expected && expected < until)
                                       : (expected < until && from < expected + w);
          if (overlaps) {
            expected = until;
            moved = true;
          }
        }
        if (!moved) break;
      }
      ASSERT_EQ(slots.EarliestStart(t, w), expected) << "round " << round << " step " << step;
      if (w > 0) {
        slots.Occupy(expected, w);
        busy.emplace_back(expected, expected + w);
        std::sort(busy.begin(), busy.end());
      }
    }
    EXPECT_LT(slots.EarliestStart(0, kEnd / 4), kEnd);
  }
}

}  // namespace
}  // namespace placement::engine::baselines
