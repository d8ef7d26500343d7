// human_units.h — times and sizes in the units a person reads, the same in every text the report
// folder writes (the terminal summary, the compare table, the HTML report).
//
// Example:
//   FormatDurationNs(41'700);   // "41.7 us"
//   FormatBytes(12 << 20);      // "12.0 MiB"
#ifndef PLACEMENT_SERVICE_REPORT_HUMAN_UNITS_H_
#define PLACEMENT_SERVICE_REPORT_HUMAN_UNITS_H_

#include <cstdint>
#include <string>

namespace placement::report {

// "812 ns", "41.7 us", "7.062 ms", "1.234 s".
std::string FormatDurationNs(int64_t ns);
// "640 B", "1.5 KiB", "12.0 MiB", "1.50 GiB", "2.00 TiB".
std::string FormatBytes(int64_t bytes);

}  // namespace placement::report

#endif  // PLACEMENT_SERVICE_REPORT_HUMAN_UNITS_H_
