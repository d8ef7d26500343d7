// list_schedule_seed.h — greedy earliest-finish-time list schedules used inside pardnn as reference
// points next to the ParDNN mapping: ops in decreasing upward rank (mean op time + mean transfer times
// to the end; HEFT-like) or in order of readiness (ETF-like), each on the allowed device where it
// would finish first given the
// transfers from its already placed inputs (per-pair links, per-device speeds). Colocation groups take
// the device of their first scheduled member. Memory as m-ETF tracks it, in list order: persistent
// bytes, live outputs (until their last consumer is placed) and received copies; a device that would
// exceed its capacity is skipped when another one has room.
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

// kRank: ops in decreasing upward rank (HEFT's order); kReadyTime: the ready op whose inputs finish
// first goes next (ETF's order: fills devices in time order, so idle devices take parallel work).
enum class SeedOrder { kRank, kReadyTime };

Assignment EarliestFinishSeed(const Model& model, const SlicingCosts& costs,
                              SeedOrder order = SeedOrder::kRank);

}  // namespace placement::engine::pardnn

#endif  // PLACEMENT_SERVICE_ENGINE_PARDNN_LIST_SCHEDULE_SEED_H_
