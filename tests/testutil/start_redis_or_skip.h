// start_redis_or_skip.h — the first line of a gtest that needs a throw-away redis-server
// (redis_server.h): starts one, skips the test on a machine without the binary, fails it when the
// server does not come up.
//
// Example:
//   TEST(OperationStoreTest, Writes) {
//     START_REDIS_OR_SKIP(redis);  // declares `RedisServer& redis`
//     Connect("127.0.0.1", redis.port());
//   }
#ifndef PLACEMENT_TESTS_TESTUTIL_START_REDIS_OR_SKIP_H_
#define PLACEMENT_TESTS_TESTUTIL_START_REDIS_OR_SKIP_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/testutil/redis_server.h"

// A macro, not a function: GTEST_SKIP and ASSERT_* must return from the test body itself.
#define START_REDIS_OR_SKIP(var)                                                   \
  absl::StatusOr<std::unique_ptr<::placement::testutil::RedisServer>> var##_or =   \
      ::placement::testutil::RedisServer::Start();                                 \
  if (absl::IsNotFound(var##_or.status())) GTEST_SKIP() << var##_or.status();      \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                                 \
  ::placement::testutil::RedisServer& var = **var##_or

#endif  // PLACEMENT_TESTS_TESTUTIL_START_REDIS_OR_SKIP_H_
