#include "service/engine/solve/solve.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "service/engine/model/digest.h"
#include "service/engine/model/model_builder.h"
#include "service/engine/model/replica_group.h"
#include "service/engine/plans/plan_model.h"
#include "service/engine/plans/window_search.h"
#include "service/engine/sim/constraints.h"
#include "service/engine/sim/placement_score.h"

namespace placement::engine {

std::string RequestDigestFor(const Model& model, const Partitioner& algorithm,
                             const v1::PlacementOptions& options,
                             std::string_view graph_digest_hex) {
  return RequestDigestHex(model, algorithm.name(), algorithm.version(), options.seed(),
                          graph_digest_hex);
}

namespace {

// One replica count's answer (api.md §2.1): the algorithm's assignment on that count's plan model, the
// window it runs with, and its score.
struct PlanCandidate {
  std::unique_ptr<PlanModel> plan_model;
  PartitionResult result;
  int32_t window = 1;
  PlacementScore score = PlacementScore::Worst();
};

// Fits first (less overflow), then more microbatches per second (D × M / step), then fewer replicas.
bool BetterPlan(const PlanCandidate& a, const PlanCandidate& b) {
  if (a.score.overflow_bytes != b.score.overflow_bytes) {
    return a.score.overflow_bytes < b.score.overflow_bytes;
  }
  // D_a / step_a > D_b / step_b, exactly (M is the same for both).
  const __int128 lhs = static_cast<__int128>(a.plan_model->replicas()) * b.score.makespan_ns;
  const __int128 rhs = static_cast<__int128>(b.plan_model->replicas()) * a.score.makespan_ns;
  if (lhs != rhs) return lhs > rhs;
  return a.plan_model->replicas() < b.plan_model->replicas();
}

}  // namespace

absl::StatusOr<v1::Placement> Solve(const Model& model, const v1::PlacementOptions& options,
                                    const SolveContext& context,
                                    const AlgorithmRegistry& registry) {
  absl::StatusOr<const Partitioner*> found = registry.Find(options.algorithm());
  if (!found.ok()) return found.status();
  return Solve(model, **found, options, context);
}

absl::StatusOr<v1::Placement> Solve(const Model& model, const Partitioner& partitioner,
                                    const v1::PlacementOptions& options,
                                    const SolveContext& context) {
  // Every simulator of this solve (the algorithm's, the window search's, the final score) is built on
  // this thread in turn: each takes the per-instance buffers the last one left.
  const SimulatorScratchScope scratch;
  SolveContext local = context;
  local.seed = options.seed();
  // The context's clock, like the deadline: a test's fake clock sees the same time as the algorithm.
  const absl::Time start = context.Now();
  // Training plans: one run per replica count the request leaves open (just one when D is fixed), each
  // with an equal share of the time left; the window is the algorithm's choice or the fastest that fits.
  const std::vector<int32_t> counts = ReplicaCountsToTry(model);
  std::optional<PlanCandidate> best;
  bool time_limited = false;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (best.has_value() && local.ShouldStop()) {
      time_limited = true;
      break;
    }
    PlanCandidate candidate;
    candidate.plan_model = std::make_unique<PlanModel>(model, counts[k]);
    const Model& plan_model = candidate.plan_model->model();
    const SolveContext share = local.WithShareOfTimeLeft(1.0 / static_cast<double>(counts.size() - k));
    absl::StatusOr<PartitionResult> result = partitioner.Partition(plan_model, share);
    if (!result.ok()) return result.status();
    // A partitioner handing back a malformed assignment is a bug, not bad input.
    const absl::Status complete =
        CheckAssignmentComplete(plan_model, result->assignment, partitioner.name());
    if (!complete.ok()) return complete;
    candidate.result = *std::move(result);
    time_limited = time_limited || candidate.result.time_limited;
    // With one replica count there is nothing to compare: the final scoring below is the only simulation
    // an answer whose window is known needs.
    const bool compare = counts.size() > 1;
    Simulator simulator(plan_model);
    if (candidate.plan_model->window_fixed()) {
      candidate.window = plan_model.plan.Window();
      if (compare) {
        candidate.score = ScoreWithWindow(plan_model, candidate.result.assignment, simulator, 0);
      }
    } else if (candidate.result.max_in_flight > 0) {
      candidate.window = candidate.result.max_in_flight;
      if (compare) {
        candidate.score =
            ScoreWithWindow(plan_model, candidate.result.assignment, simulator, candidate.window);
      }
    } else {
      // Within this count's share of the time limit: an algorithm cut short before it chose a window
      // (a portfolio at its deadline) gets the first of no window, the working window and W = 1 that
      // fits, not a full search past the limit (eight unrolled simulations at M = 8). The working
      // window's score, when the algorithm simulated it, is not simulated again.
      WindowSearchOptions search;
      search.stop_only_once_fitting = true;
      if (candidate.result.simulated) {
        search.known_window = plan_model.plan.Window();
        search.known_score = PlacementScore{candidate.result.simulated->overflow_bytes,
                                            candidate.result.simulated->makespan_ns};
      }
      const WindowChoice choice =
          ChooseWindow(plan_model, candidate.result.assignment, simulator, share, search);
      candidate.window = choice.max_in_flight;
      candidate.score = choice.score;
    }
    if (!best.has_value() || BetterPlan(candidate, *best)) best = std::move(candidate);
  }
  const absl::Duration solve_time = context.Now() - start;
  const Model& plan_model = best->plan_model->model();
  const PartitionResult& result = best->result;

  v1::Placement placement =
      ScoreAssignment(plan_model, result.assignment, nullptr,
                      best->plan_model->window_fixed() ? 0 : best->window);
  v1::Provenance* provenance = placement.mutable_provenance();
  provenance->set_algorithm(std::string(partitioner.name()));
  provenance->set_winner(result.winner);
  provenance->set_winner_makespan_ns(result.winner.empty() ? 0 : result.winner_makespan_ns);
  provenance->set_requested_algorithm(std::string(partitioner.name()));
  provenance->set_algorithm_version(std::string(partitioner.version()));
  const std::string graph_digest = GraphDigestHex(model);
  provenance->set_graph_digest(graph_digest);
  provenance->set_request_digest(RequestDigestFor(model, partitioner, options, graph_digest));
  provenance->set_cache(v1::MISS);
  provenance->set_solve_ns(absl::ToInt64Nanoseconds(solve_time));
  provenance->set_ccr(result.ccr);
  provenance->set_dop(result.dop);
  provenance->set_time_limited(time_limited);
  return placement;
}

absl::StatusOr<v1::EvaluateResponse> Evaluate(const v1::EvaluateRequest& request,
                                              const ModelLimits& limits) {
  std::vector<FieldViolation> violations;
  absl::StatusOr<Model> model =
      BuildModel(request.graph(), request.cluster(), request.options(), &violations, limits);
  const int32_t num_ops = request.graph().ops_size();
  const int32_t num_devices = request.cluster().devices_size();
  // With a fixed D the assignment indexes replica group 0 (the first N/D devices).
  const int32_t fixed_replicas = model.ok() ? model->plan.data_parallel : 1;
  const int32_t usable = fixed_replicas > 1 ? num_devices / fixed_replicas : num_devices;
  if (request.device_size() != num_ops) {
    violations.push_back({"device", absl::StrCat("has ", request.device_size(),
                                                 " entries but graph has ", num_ops, " ops")});
  } else {
    for (int32_t i = 0; i < num_ops && violations.size() < 100; ++i) {
      const int32_t d = request.device(i);
      if (d < 0 || d >= num_devices) {
        violations.push_back({absl::StrCat("device[", i, "]"),
                              absl::StrCat("index ", d, " out of range (cluster has ",
                                           num_devices, " devices)")});
      } else if (d >= usable) {
        violations.push_back(
            {absl::StrCat("device[", i, "]"),
             absl::StrCat("index ", d, " is outside replica group 0 (the first ", usable, " of ",
                          num_devices, " devices with options.data_parallel ", fixed_replicas, ")")});
      }
    }
  }
  if (!violations.empty()) return ViolationsError(violations);
  if (!model.ok()) return model.status();

  Assignment assignment(model->num_ops());
  DeviceId highest = 0;
  for (OpId v = 0; v < model->num_ops(); ++v) {
    assignment[v] = request.device(model->request_index[v]);
    highest = std::max(highest, assignment[v]);
  }
  const SimulatorScratchScope scratch;
  // Open choices of the plan are made for this assignment, as the solver would: D among the counts
  // whose group 0 holds every device the assignment uses (most microbatches per second), W the fastest
  // that fits.
  std::optional<PlanCandidate> best;
  for (const int32_t replicas : ReplicaCountsToTry(*model)) {
    if (highest >= model->num_devices() / replicas) continue;
    PlanCandidate candidate;
    candidate.plan_model = std::make_unique<PlanModel>(*model, replicas);
    const Model& plan_model = candidate.plan_model->model();
    Simulator simulator(plan_model);
    if (candidate.plan_model->window_fixed()) {
      candidate.window = plan_model.plan.Window();
      candidate.score = ScoreWithWindow(plan_model, assignment, simulator, 0);
    } else {
      const WindowChoice choice = ChooseWindow(plan_model, assignment, simulator);
      candidate.window = choice.max_in_flight;
      candidate.score = choice.score;
    }
    if (!best.has_value() || BetterPlan(candidate, *best)) best = std::move(candidate);
  }
  v1::EvaluateResponse response;
  std::vector<v1::ConstraintViolation> problems;
  *response.mutable_placement() =
      ScoreAssignment(best->plan_model->model(), assignment, &problems,
                      best->plan_model->window_fixed() ? 0 : best->window);
  for (v1::ConstraintViolation& problem : problems) {
    *response.add_violations() = std::move(problem);
  }
  v1::Provenance* provenance = response.mutable_placement()->mutable_provenance();
  provenance->set_algorithm("evaluate");
  provenance->set_graph_digest(GraphDigestHex(*model));
  return response;
}

}  // namespace placement::engine
