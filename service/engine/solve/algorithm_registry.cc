#include "service/engine/solve/algorithm_registry.h"

#include <memory>

#include "service/engine/baselines/heft.h"
#include "service/engine/baselines/m_etf.h"
#include "service/engine/baselines/m_topo.h"
#include "service/engine/baselines/metis.h"
#include "service/engine/baselines/pipeline.h"
#include "service/engine/pardnn/pardnn_partitioner.h"
#include "service/engine/portfolio/portfolio.h"
#include "service/engine/stages/stages_partitioner.h"
#include "service/engine/partition/simple_partitioners.h"

namespace placement::engine {
namespace {

struct Registry {
  std::vector<std::unique_ptr<Partitioner>> owned;
  std::vector<const Partitioner*> all;

  // pardnn first, the baselines, and last the portfolio of all of them, `auto` (the default).
  Registry() {
    Add(MakePardnnPartitioner());
    Add(MakeMEtfPartitioner());
    Add(MakeMTopoPartitioner());
    Add(MakeHeftPartitioner());
    Add(MakeMetisPartitioner());
    Add(MakePipelinePartitioner());
    Add(MakeStagesPartitioner());
    Add(MakeRoundRobinPartitioner());
    Add(MakeSingleDevicePartitioner());
    std::vector<const Partitioner*> members = all;
    Add(MakePortfolioPartitioner(std::move(members)));
  }
  void Add(std::unique_ptr<Partitioner> partitioner) {
    all.push_back(partitioner.get());
    owned.push_back(std::move(partitioner));
  }
};

const Registry& GetRegistry() {
  // Built on first use, never destroyed (safe to use from any thread during shutdown).
  static const Registry* registry = new Registry();
  return *registry;
}

}  // namespace

const Partitioner* FindAlgorithm(std::string_view name) {
  if (name.empty()) name = kDefaultAlgorithm;
  for (const Partitioner* partitioner : GetRegistry().all) {
    if (partitioner->name() == name) return partitioner;
  }
  return nullptr;
}

const std::vector<const Partitioner*>& AllAlgorithms() { return GetRegistry().all; }

}  // namespace placement::engine
