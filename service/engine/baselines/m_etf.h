// m_etf.h — Baechi's m-ETF (Jeon et al., SoCC 2020): earliest-time-first list scheduling (Hwang, Chow,
// Anger and Lee, 1989) that only places an op on a device where its memory fits, with tensor lifetimes
// tracked in the schedule being built.
//
// The clock is event driven. At the current moment CM, for every idle device and every op whose inputs
// have all been scheduled, the earliest start is max(CM, arrival of the last input on that device); the
// pair with the smallest earliest start is scheduled (ties: higher static level, then smaller OpId, then
// the device that finishes it first, then the smaller DeviceId). When the best start is not earlier than
// the next moment a busy device frees up, CM advances to that moment instead (on a tie the device that
// frees up then may offer the same start without a transfer). Op times use the device's speed and
// transfers the per-pair link (a heterogeneous extension of Baechi, which assumes one speed and one link).
//
// Memory, per device: persistent bytes of a colocation group are reserved when its first member is placed
// (and the group is then fixed to that device); an op holds temp bytes while it runs and its output from
// its start until all its consumers have finished; a consumer on another device holds a received copy from
// its placement until all consumers of the producer have finished. An op is offered to a device only when
// the bytes it adds fit in the device's capacity; ops that do not fit wait until memory is released. If
// nothing is running and nothing fits anywhere, the ready op with the highest level goes to its allowed
// device with the most room (the simulator reports the overflow).
//
// Cost O((V + E) * D * log V).
//
// Example:
//   std::unique_ptr<Partitioner> m_etf = MakeMEtfPartitioner();
//   absl::StatusOr<PartitionResult> result = m_etf->Partition(model, context);
//
// Faithful to the published method, and where it is extended:
//
// m-ETF: Baechi assumes one speed and one link cost; we use each device's speed and each pair's link
// (the natural heterogeneous extension). Ties in start time go to the faster finish. A schedule step only
// happens when its start is *strictly* before the next moment a busy device frees up, so a device freeing
// up at the same instant may compete (fewer needless transfers).
#ifndef PLACEMENT_SERVICE_ENGINE_BASELINES_M_ETF_H_
#define PLACEMENT_SERVICE_ENGINE_BASELINES_M_ETF_H_

#include <memory>

#include "service/engine/partition/partitioner.h"

namespace placement::engine {

// api.md name "m_etf".
std::unique_ptr<Partitioner> MakeMEtfPartitioner();

// Re-placement's form (../replace/): m-ETF where binding a unit (colocation group or op) to any device
// but the one that held most of its persistent bytes before (Model::previous_device) counts as starting
// `ns_per_byte` × those bytes later — in the choice of the next (op, device) pair only; the schedule
// runs at the real times. So a unit waits a little for its old device, or goes elsewhere when that
// gains more than its bytes are worth. ns_per_byte <= 0 or no previous placement: plain m-ETF.
absl::StatusOr<PartitionResult> MEtfTowardsPrevious(const Model& model, const SolveContext& context,
                                                    double ns_per_byte);

}  // namespace placement::engine

#endif  // PLACEMENT_SERVICE_ENGINE_BASELINES_M_ETF_H_
