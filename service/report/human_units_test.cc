#include "service/report/human_units.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace placement::report {
namespace {

TEST(HumanUnitsTest, PicksAReadableUnit) {
  EXPECT_EQ(FormatDurationNs(812), "812 ns");
  EXPECT_EQ(FormatDurationNs(-812), "-812 ns");
  EXPECT_EQ(FormatDurationNs(41'700), "41.7 us");
  EXPECT_EQ(FormatDurationNs(7'062'000), "7.062 ms");
  EXPECT_EQ(FormatDurationNs(1'234'000'000), "1.234 s");
  EXPECT_EQ(FormatDurationNs(4'000'000'000), "4.000 s");
  EXPECT_EQ(FormatBytes(640), "640 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(12 << 20), "12.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatBytes(int64_t{2} << 40), "2.00 TiB");
}

}  // namespace
}  // namespace placement::report
