#include "service/engine/solve/algorithm_registry.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/partition/simple_partitioners.h"
#include "service/engine/portfolio/portfolio.h"
#include "service/engine/stages/stages_partitioner.h"
#include "service/engine/solve/testing_algorithms.h"

namespace placement::engine {

AlgorithmRegistry::AlgorithmRegistry(AlgorithmRegistryOptions options) {
  // A re-placement's quick members: every member, some in a form of their own (owned here, not
  // listed). pardnn without its refinement and re-timing (the re-placement's own search follows; on
  // GPT-12 losing its first device this form's answer kept the state in place at 1.003 x a fresh
  // solve's step, where the others' ended at 1.044 x, for a tenth of the fresh solve's time), and only
  // where memory cannot bind (its memory work would be most of the re-placement's time; the
  // re-placement repairs memory itself). `stages` planning its two orders only (not the exact search
  // over every contiguous split: most of its time on small branchy graphs, for a fresh plan a
  // re-placement rarely keeps).
  PardnnOptions quick_pardnn;
  quick_pardnn.refinement_max_simulations = 0;
  quick_pardnn.retiming_rounds = 0;
  quick_pardnn.decline_when_memory_can_bind = true;
  StagesOptions chains;
  chains.exact_search = false;
  std::vector<const Partitioner*> replacement;  // in the members' order
  const auto add_member = [&](std::unique_ptr<Partitioner> member,
                              std::unique_ptr<Partitioner> replacement_form = nullptr) {
    replacement.push_back(replacement_form != nullptr ? replacement_form.get() : member.get());
    if (replacement_form != nullptr) owned_.push_back(std::move(replacement_form));
    Add(std::move(member));
  };
  // pardnn first, the baselines, and last the portfolio of all of them, `auto` (the default).
  add_member(MakePardnnPartitioner(), MakePardnnPartitioner(quick_pardnn));
  add_member(MakeMEtfPartitioner());
  add_member(MakeMTopoPartitioner());
  add_member(MakeHeftPartitioner());
  add_member(MakeMetisPartitioner());
  add_member(MakePipelinePartitioner());
  add_member(MakeStagesPartitioner(), MakeStagesPartitioner(chains));
  add_member(MakeRoundRobinPartitioner());
  add_member(MakeSingleDevicePartitioner());
  std::vector<const Partitioner*> members = all_;
  Add(MakePortfolioPartitioner(std::move(members), PortfolioOptions(), std::move(replacement)));
  if (options.include_testing_algorithms) {
    for (std::unique_ptr<Partitioner>& testing : MakeTestingPartitioners()) Add(std::move(testing));
  }
}

AlgorithmRegistry::~AlgorithmRegistry() = default;

const AlgorithmRegistry& AlgorithmRegistry::Default() {
  static const AlgorithmRegistry* registry = new AlgorithmRegistry();
  return *registry;
}

void AlgorithmRegistry::Add(std::unique_ptr<Partitioner> partitioner) {
  all_.push_back(partitioner.get());
  owned_.push_back(std::move(partitioner));
}

absl::StatusOr<const Partitioner*> AlgorithmRegistry::Find(std::string_view name,
                                                           std::string_view field) const {
  const std::string_view wanted = name.empty() ? kDefaultAlgorithm : name;
  for (const Partitioner* partitioner : all_) {
    if (partitioner->name() == wanted) return partitioner;
  }
  std::vector<std::string> known;
  known.reserve(all_.size());
  for (const Partitioner* partitioner : all_) known.emplace_back(partitioner->name());
  return ViolationsError({FieldViolation{
      std::string(field), absl::StrCat("unknown algorithm \"", std::string(wanted), "\" (known: ",
                                       absl::StrJoin(known, ", "), ")")}});
}

}  // namespace placement::engine
