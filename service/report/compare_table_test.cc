#include "service/report/compare_table.h"

#include <string>

#include "gtest/gtest.h"

namespace placement::report {
namespace {

CompareReport SampleReport() {
  CompareReport report;
  report.request = "bert.json";
  report.num_ops = 1234;
  report.num_edges = 2345;
  report.device_names = {"gpu0", "gpu1"};
  report.lower_bound_ns = 1'000'000;

  CompareRow pardnn;
  pardnn.algorithm = "pardnn";
  pardnn.feasible = true;
  pardnn.makespan_ns = 1'234'567;
  pardnn.lower_bound_ns = 1'000'000;
  pardnn.peak_memory_bytes = {512, 1000};
  pardnn.capacity_bytes = {1024, 1024};
  pardnn.transfer_bytes = 3 << 20;
  pardnn.solve_ns = 12'000'000;
  report.rows.push_back(pardnn);

  CompareRow automatic = pardnn;
  automatic.algorithm = "auto";
  automatic.winner = "heft";
  automatic.makespan_ns = 1'100'000;
  automatic.transfer_bytes = 1536;
  automatic.solve_ns = 2'500'000'000;
  automatic.time_limited = true;
  report.rows.push_back(automatic);

  CompareRow m_topo;
  m_topo.algorithm = "m_topo";
  m_topo.feasible = false;
  m_topo.reason = "gpu0 short by 100 bytes at 5 us";
  m_topo.makespan_ns = 900;
  m_topo.lower_bound_ns = 1'000'000;
  m_topo.peak_memory_bytes = {1124, 0};
  m_topo.capacity_bytes = {1024, 1024};
  m_topo.solve_ns = 45'000;
  report.rows.push_back(m_topo);

  report.rows.push_back(CompareRowFromError("metis", "INTERNAL: broken, really"));
  return report;
}

TEST(CompareTableTest, TextLayout) {
  const std::string expected = R"(request: bert.json
1234 ops, 2345 edges, 2 devices (gpu0, gpu1); lower bound 1.000 ms

algorithm      feasible  makespan  makespan/LB  peak memory (% of capacity)  transfer       solve time
pardnn         yes       1.235 ms         1.23  50% 98%                       3.0 MiB        12.000 ms
auto (heft) *  yes       1.100 ms         1.10  50% 98%                       1.5 KiB  2.500 s (limit)
m_topo         no          900 ns         0.00  110% 0%                           0 B          45.0 us
metis          error            -            -  -                                   -                -

* best feasible (smallest simulated makespan)
m_topo: gpu0 short by 100 bytes at 5 us
metis: INTERNAL: broken, really
)";
  EXPECT_EQ(FormatCompareReport(SampleReport(), CompareFormat::kText), expected);
}

TEST(CompareTableTest, MarkdownLayout) {
  const std::string expected = R"(**bert.json**: 1234 ops, 2345 edges, 2 devices (gpu0, gpu1); lower bound 1.000 ms

| algorithm | feasible | makespan | makespan/LB | peak memory (% of capacity) | transfer | solve time |
|---|---|---:|---:|---|---:|---:|
| pardnn | yes | 1.235 ms | 1.23 | 50% 98% | 3.0 MiB | 12.000 ms |
| auto (heft) * | yes | 1.100 ms | 1.10 | 50% 98% | 1.5 KiB | 2.500 s (limit) |
| m_topo | no | 900 ns | 0.00 | 110% 0% | 0 B | 45.0 us |
| metis | error | - | - | - | - | - |

\* best feasible (smallest simulated makespan)

- m_topo: gpu0 short by 100 bytes at 5 us
- metis: INTERNAL: broken, really
)";
  EXPECT_EQ(FormatCompareReport(SampleReport(), CompareFormat::kMarkdown), expected);
}

TEST(CompareTableTest, CsvLayout) {
  const std::string expected =
      "algorithm,winner,feasible,makespan_ns,lower_bound_ns,makespan_over_lower_bound,"
      "peak_memory_percent,transfer_bytes,solve_ns,time_limited,error,reason\n"
      "pardnn,pardnn,true,1234567,1000000,1.2346,50.0;97.7,3145728,12000000,false,,\n"
      "auto,heft,true,1100000,1000000,1.1000,50.0;97.7,1536,2500000000,true,,\n"
      "m_topo,m_topo,false,900,1000000,0.0009,109.8;0.0,0,45000,false,,gpu0 short by 100 bytes at 5 us\n"
      "metis,,,,,,,,,,\"INTERNAL: broken, really\",\n";
  EXPECT_EQ(FormatCompareReport(SampleReport(), CompareFormat::kCsv), expected);
}

TEST(CompareTableTest, JsonLayout) {
  const std::string expected = R"({
  "request": "bert.json",
  "ops": 1234,
  "edges": 2345,
  "devices": ["gpu0", "gpu1"],
  "lower_bound_ns": 1000000,
  "best": "auto",
  "rows": [
    {"algorithm": "pardnn", "winner": "pardnn", "feasible": true, "makespan_ns": 1234567, "lower_bound_ns": 1000000, "makespan_over_lower_bound": 1.2346, "peak_memory_percent": [50.0, 97.7], "peak_memory_bytes": [512, 1000], "capacity_bytes": [1024, 1024], "transfer_bytes": 3145728, "solve_ns": 12000000, "time_limited": false, "reason": ""},
    {"algorithm": "auto", "winner": "heft", "feasible": true, "makespan_ns": 1100000, "lower_bound_ns": 1000000, "makespan_over_lower_bound": 1.1000, "peak_memory_percent": [50.0, 97.7], "peak_memory_bytes": [512, 1000], "capacity_bytes": [1024, 1024], "transfer_bytes": 1536, "solve_ns": 2500000000, "time_limited": true, "reason": ""},
    {"algorithm": "m_topo", "winner": "m_topo", "feasible": false, "makespan_ns": 900, "lower_bound_ns": 1000000, "makespan_over_lower_bound": 0.0009, "peak_memory_percent": [109.8, 0.0], "peak_memory_bytes": [1124, 0], "capacity_bytes": [1024, 1024], "transfer_bytes": 0, "solve_ns": 45000, "time_limited": false, "reason": "gpu0 short by 100 bytes at 5 us"},
    {"algorithm": "metis", "error": "INTERNAL: broken, really"}
  ]
}
)";
  EXPECT_EQ(FormatCompareReport(SampleReport(), CompareFormat::kJson), expected);
}

TEST(CompareTableTest, BestRowIsTheFastestFeasibleOne) {
  CompareReport report = SampleReport();
  EXPECT_EQ(BestCompareRow(report), 1);
  report.rows[1].feasible = false;
  EXPECT_EQ(BestCompareRow(report), 0);
  report.rows[0].feasible = false;
  EXPECT_EQ(BestCompareRow(report), -1);
}

TEST(CompareTableTest, ManyDevicesAreSummarised) {
  CompareReport report;
  CompareRow row;
  row.algorithm = "heft";
  row.feasible = true;
  for (int d = 0; d < 10; ++d) {
    row.peak_memory_bytes.push_back(d * 10);
    row.capacity_bytes.push_back(100);
  }
  report.rows.push_back(row);
  EXPECT_NE(FormatCompareReport(report, CompareFormat::kText).find("max 90% mean 45%"), std::string::npos);
}

TEST(CompareTableTest, ParsesFormats) {
  EXPECT_EQ(*ParseCompareFormat("text"), CompareFormat::kText);
  EXPECT_EQ(*ParseCompareFormat("JSON"), CompareFormat::kJson);
  EXPECT_EQ(*ParseCompareFormat("csv"), CompareFormat::kCsv);
  EXPECT_EQ(*ParseCompareFormat("md"), CompareFormat::kMarkdown);
  EXPECT_FALSE(ParseCompareFormat("xml").ok());
}

}  // namespace
}  // namespace placement::report
