// list_schedule_seed.h — a greedy earliest-finish-time list schedule (HEFT-like) used inside pardnn as
// a reference point next to the ParDNN mapping: ops in decreasing upward rank (mean op time + mean
// transfer times to the end), each on the allowed device where it would finish first given the
// transfers from its already placed inputs (per-pair links, per-device speeds). Colocation groups take
// the device of their first scheduled member; a device whose persistent bytes would exceed its
// capacity is skipped when another one has room.
//
// It is a seed, not the judge: the simulator re-schedules whatever assignment it returns.
// O((V + E) * D + V log V).
//
// Example:
//   Assignment seed = EarliestFinishSeed(model, costs);
#ifndef PLACEMENT_SERVICE_ENGINE_PARDNN_LIST_SCHEDULE_SEED_H_
#define PLACEMENT_SERVICE_ENGINE_PARDNN_LIST_SCHEDULE_SEED_H_

#include "service/engine/model/model.h"
#include "service/engine/pardnn/linear_clustering.h"

namespace placement::engine::pardnn {

Assignment EarliestFinishSeed(const Model& model, const SlicingCosts& costs);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_LIST_SCHEDULE_SEED_H_
