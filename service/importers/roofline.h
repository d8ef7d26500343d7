// roofline.h — op times from work and traffic when a source has shapes but no measured times.
//
//   RooflineNs(flops, bytes, model) = launch_overhead_ns + max(flops / peak, bytes / bandwidth)
//
// Used by the onnx importer, by chakra when no Kineto trace matches an op, and by the scaled generators.
//
// Example:
//   int64_t ns = RooflineNs(2.0 * m * n * k, 4.0 * (m * k + k * n + m * n), RooflineModel());
#ifndef PLACEMENT_SERVICE_ENGINE_IMPORTERS_ROOFLINE_H_
#define PLACEMENT_SERVICE_ENGINE_IMPORTERS_ROOFLINE_H_

#include <cstdint>

#include "service/importers/import_options.h"

namespace placement::importers {

int64_t RooflineNs(double flops, double bytes, const RooflineModel& model);

}  // namespace placement::importers

#endif  // PLACEMENT_SERVICE_ENGINE_IMPORTERS_ROOFLINE_H_
