// solving_suite.h — the fixture of end-to-end suites that solve whole requests: one placement_server
// (two workers) shared by the suite, and a client patient enough for whole solves.
//
// The client makes one attempt (a retry would hide the failure a test looks for) and waits up to
// 120 s per call (whole solves, under sanitizers too). A suite derives from SolvingSuiteTest and,
// when it needs more set-up, calls SolvingSuiteTest::SetUp() first.
//
// Example:
//   class PlansE2ETest : public SolvingSuiteTest {
//    protected:
//     void SetUp() override {
//       SolvingSuiteTest::SetUp();
//       if (HasFatalFailure()) return;
//       ... read the request ...
//     }
//   };
//   TEST_F(PlansE2ETest, X) { absl::StatusOr<v1::PlaceResponse> r = client_->Place(request); ... }
#ifndef PLACEMENT_TESTS_E2E_SOLVING_SUITE_H_
#define PLACEMENT_TESTS_E2E_SOLVING_SUITE_H_

#include <memory>

#include "absl/time/time.h"
#include "client/placement_client.h"
#include "gtest/gtest.h"
#include "tests/e2e/client_options.h"
#include "tests/e2e/server_process.h"

namespace placement::e2e {

class SolvingSuiteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartSuiteServer({"--workers=2"}); }
  static void TearDownTestSuite() { StopSuiteServer(server_); }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    client::ClientOptions options = OneAttemptOptions(*server_);
    options.default_timeout = absl::Seconds(120);
    client_ = std::make_unique<client::PlacementClient>(options);
  }

  // A raw pointer: a static unique_ptr would be destroyed at exit (server_process.h).
  static inline ServerProcess* server_ = nullptr;
  std::unique_ptr<client::PlacementClient> client_;
};

}  // namespace placement::e2e

#endif  // PLACEMENT_TESTS_E2E_SOLVING_SUITE_H_
