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

// Simulates `assignment` (canonical op ids) and fills device (request order), outcome, reason and
// metrics. Constraint violations make the outcome INFEASIBLE and are listed in `problems` if non-null.
v1::Placement ScoreAssignment(const Model& model, const Assignment& assignment,
                              std::vector<v1::ConstraintViolation>* problems = nullptr);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SOLVE_SCORE_ASSIGNMENT_H_
