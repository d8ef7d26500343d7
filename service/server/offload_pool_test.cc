#include "service/server/offload_pool.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(OffloadPoolTest, RunsTasksOnItsOwnThreads) {
  OffloadPool pool(2, 16);
  absl::Notification done;
  std::thread::id ran_on;
  ASSERT_TRUE(pool.TryPost([&] {
    ran_on = std::this_thread::get_id();
    done.Notify();
  }));
  done.WaitForNotification();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(OffloadPoolTest, RefusesTasksBeyondItsQueueBound) {
  OffloadPool pool(1, 2);
  absl::Notification started, release;
  ASSERT_TRUE(pool.TryPost([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();  // the only thread is busy: the next two wait, the third is refused
  std::atomic<int> ran{0};
  EXPECT_TRUE(pool.TryPost([&] { ++ran; }));
  EXPECT_TRUE(pool.TryPost([&] { ++ran; }));
  EXPECT_EQ(pool.queued(), 2u);
  EXPECT_FALSE(pool.TryPost([&] { ran += 100; }));
  release.Notify();
  // The destructor (end of scope below) runs what is queued; checked in the next test.
  while (pool.queued() > 0) std::this_thread::yield();
}

TEST(OffloadPoolTest, DestructorRunsWhatIsQueuedThenJoins) {
  std::atomic<int> ran{0};
  absl::Notification started, release;
  {
    OffloadPool pool(1, 8);
    ASSERT_TRUE(pool.TryPost([&] {
      started.Notify();
      release.WaitForNotification();
      ++ran;
    }));
    started.WaitForNotification();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.TryPost([&] { ++ran; }));
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 6);
}

}  // namespace
}  // namespace placement::server
