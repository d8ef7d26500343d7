// score_assignment.h — an assignment scored by the simulator, as the v1::Placement every reply carries.
//
// Separate from solve.h (library `placement_scoring`, which links only the simulator and the model) so
// that tools which score or draw placements without running an algorithm — `placementctl place
// --report`, service/report — link no algorithm and no libmetis.
//
// Example:
//   absl::StatusOr<Model> model = BuildModel(request);
//   v1::Placement scored = ScoreAssignment(*model, assignment);  // device in request order, metrics
#ifndef PLACEMENT_SERVICE_ENGINE_SOLVE_SCORE_ASSIGNMENT_H_
#define PLACEMENT_SERVICE_ENGINE_SOLVE_SCORE_ASSIGNMENT_H_

#include <vector>

#include "placement/v1/placement.pb.h"
#include "placement/v1/placement_service.pb.h"
#include "service/engine/model/model.h"

namespace placement::engine {

// Simulates `assignment` (canonical op ids) and fills device (request order), outcome, reason, metrics
// and plan. Constraint violations make the outcome INFEASIBLE and are listed in `problems` if non-null.
// Training plans: `model` is the plan model (replica group 0's devices, see plans/plan_model.h);
// `max_in_flight` is the window to simulate with (0 = the model's plan W, or no window when it has none).
v1::Placement ScoreAssignment(const Model& model, const Assignment& assignment,
                              std::vector<v1::ConstraintViolation>* problems = nullptr,
                              int32_t max_in_flight = 0);

// data_parallel × microbatches per second of a step of `makespan_ns` (0 when it takes no time).
double MicrobatchesPerSecond(int32_t data_parallel, int32_t microbatches, int64_t makespan_ns);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_SCORE_ASSIGNMENT_H_
