// constraints.h — checks an assignment against the model's hard constraints (pins, allowed kinds,
// colocation groups) and the device range; used by Evaluate and by tests of every algorithm.
//
// Example:
//   std::vector<ConstraintProblem> problems = CheckConstraints(model, assignment);
//   if (problems.empty()) { ... }
#ifndef PLACEMENT_SERVICE_ENGINE_SIM_CONSTRAINTS_H_
#define PLACEMENT_SERVICE_ENGINE_SIM_CONSTRAINTS_H_

#include <string>
#include <vector>

#include "service/engine/model/model.h"

namespace placement::engine {

struct ConstraintProblem {
  OpId op;                  // canonical op id
  std::string description;  // e.g. "op \"w1\" is pinned to \"gpu1\" but placed on \"gpu0\""
};

// Every violated pin, kind and colocation constraint (colocation: each member placed apart from the
// group's first member by OpId is reported once). Entries of `assignment` must be valid device ids.
std::vector<ConstraintProblem> CheckConstraints(const Model& model, const Assignment& assignment);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_SIM_CONSTRAINTS_H_
