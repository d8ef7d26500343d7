#include "service/core/sizing.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/engine/model/model_builder.h"

namespace placement::core {
namespace {

double SpeedOf(const v1::Device& device) { return device.has_speed() ? device.speed() : 1.0; }

// The pool's hosts in order of first appearance, each with its devices fastest first (more memory
// next, then cluster order).
std::vector<std::vector<int32_t>> HostsFastestFirst(const v1::Cluster& pool) {
  std::vector<std::vector<int32_t>> hosts;
  std::map<std::string, size_t> host_of;
  for (int32_t i = 0; i < pool.devices_size(); ++i) {
    auto [it, added] = host_of.emplace(pool.devices(i).node(), hosts.size());
    if (added) hosts.emplace_back();
    hosts[it->second].push_back(i);
  }
  for (std::vector<int32_t>& devices : hosts) {
    std::stable_sort(devices.begin(), devices.end(), [&pool](int32_t a, int32_t b) {
      const v1::Device& x = pool.devices(a);
      const v1::Device& y = pool.devices(b);
      if (SpeedOf(x) != SpeedOf(y)) return SpeedOf(x) > SpeedOf(y);
      return x.memory_bytes() > y.memory_bytes();
    });
  }
  return hosts;
}

double SpeedOfFirst(const v1::Cluster& pool, const std::vector<int32_t>& devices, size_t n) {
  double total = 0.0;
  for (size_t k = 0; k < n && k < devices.size(); ++k) total += SpeedOf(pool.devices(devices[k]));
  return total;
}

// The n devices a count uses (see sizing.h).
std::vector<int32_t> DevicesForCount(const v1::Cluster& pool,
                                     const std::vector<std::vector<int32_t>>& hosts, int32_t n) {
  const size_t want = static_cast<size_t>(n);
  // One host that holds them all: the one whose n fastest devices are fastest, then the first.
  const std::vector<int32_t>* single = nullptr;
  double single_speed = 0.0;
  for (const std::vector<int32_t>& devices : hosts) {
    if (devices.size() < want) continue;
    const double speed = SpeedOfFirst(pool, devices, want);
    if (single == nullptr || speed > single_speed) {
      single = &devices;
      single_speed = speed;
    }
  }
  if (single != nullptr) return std::vector<int32_t>(single->begin(), single->begin() + n);
  // Else whole hosts, the most devices first (then the faster, then the first), the last one partly.
  std::vector<size_t> order(hosts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (hosts[a].size() != hosts[b].size()) return hosts[a].size() > hosts[b].size();
    return SpeedOfFirst(pool, hosts[a], hosts[a].size()) > SpeedOfFirst(pool, hosts[b], hosts[b].size());
  });
  std::vector<int32_t> chosen;
  for (const size_t h : order) {
    for (const int32_t d : hosts[h]) {
      if (chosen.size() == want) return chosen;
      chosen.push_back(d);
    }
  }
  return chosen;
}

// The best-per-device objective's figure: microbatches per second per device (rows have at least one).
double ThroughputPerDevice(const v1::RecommendCandidate& row) {
  return row.microbatches_per_second() / std::max(1, row.devices());
}

std::string Throughput(double microbatches_per_second) {
  return absl::StrFormat("%.4g microbatches/s", microbatches_per_second);
}

std::string Describe(const v1::RecommendCandidate& row) {
  return absl::StrCat(row.devices(), row.devices() == 1 ? " device" : " devices",
                      row.data_parallel() > 1 ? absl::StrCat(" (", row.data_parallel(), " replicas)") : "",
                      " at ", Throughput(row.microbatches_per_second()),
                      row.speedup() > 0 ? absl::StrFormat(", %.2fx one device", row.speedup()) : "");
}

}  // namespace

absl::StatusOr<std::vector<SizingCandidate>> PlanSizingCandidates(const v1::RecommendRequest& request,
                                                                  int32_t max_candidates) {
  std::vector<engine::FieldViolation> violations;
  const int32_t pool = request.cluster().devices_size();
  if (pool == 0) violations.push_back({"cluster.devices", "the pool has no devices"});
  if (request.max_devices() < 0 || request.max_devices() > pool) {
    violations.push_back({"max_devices", absl::StrCat(request.max_devices(), " is outside 0..", pool,
                                                      " (the pool's devices; 0 = all of them)")});
  }
  if (!v1::RecommendObjective_IsValid(request.objective())) {
    violations.push_back({"objective", absl::StrCat("unknown value ", request.objective())});
  }
  const double within = request.within_percent();
  if (request.objective() == v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN) {
    if (!(within > 0.0 && within < 100.0)) {
      violations.push_back({"within_percent",
                            absl::StrCat(within, " is outside (0, 100): RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN "
                                                 "needs how far below the fastest a candidate may be")});
    }
  } else if (within != 0.0) {
    violations.push_back({"within_percent", absl::StrCat(within, " is set but the objective is not "
                                                                 "RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN")});
  }
  const int32_t fixed_replicas =
      request.options().has_data_parallel() ? request.options().data_parallel() : 0;
  if (fixed_replicas < 0) {
    violations.push_back({"options.data_parallel", absl::StrCat(fixed_replicas, " is negative")});
  }
  if (!violations.empty()) return engine::ViolationsError(violations);

  const int32_t max_devices = request.max_devices() == 0 ? pool : request.max_devices();
  const std::vector<std::vector<int32_t>> hosts = HostsFastestFirst(request.cluster());
  std::vector<SizingCandidate> candidates;
  int64_t count = 0;
  for (int32_t n = 1; n <= max_devices; ++n) {
    for (int32_t d = 1; d <= n; ++d) {
      if (n % d == 0 && (fixed_replicas == 0 || fixed_replicas == d)) ++count;
    }
  }
  if (count > max_candidates) {
    return engine::ViolationsError(
        {{"max_devices", absl::StrCat(max_devices, " gives ", count, " candidates (every count with every "
                                      "data-parallel split), more than the limit of ", max_candidates)}});
  }
  for (int32_t n = 1; n <= max_devices; ++n) {
    const std::vector<int32_t> devices = DevicesForCount(request.cluster(), hosts, n);
    for (int32_t d = 1; d <= n; ++d) {
      if (n % d != 0 || (fixed_replicas != 0 && fixed_replicas != d)) continue;
      candidates.push_back(SizingCandidate{n, d, devices});
    }
  }
  return candidates;
}

v1::Cluster CandidateCluster(const v1::Cluster& pool, const SizingCandidate& candidate) {
  v1::Cluster cluster;
  std::set<std::string> used;
  for (const int32_t i : candidate.pool_devices) {
    *cluster.add_devices() = pool.devices(i);
    used.insert(pool.devices(i).name());
  }
  if (pool.has_intra_node()) *cluster.mutable_intra_node() = pool.intra_node();
  if (pool.has_inter_node()) *cluster.mutable_inter_node() = pool.inter_node();
  for (const v1::Link& link : pool.links()) {
    if (used.count(link.a()) != 0 && used.count(link.b()) != 0) *cluster.add_links() = link;
  }
  return cluster;
}

v1::PlacementOptions CandidateOptions(const v1::PlacementOptions& options, const v1::Cluster& cluster,
                                      int32_t data_parallel) {
  v1::PlacementOptions own = options;
  own.clear_data_parallel();
  if (data_parallel > 1) own.set_data_parallel(data_parallel);
  if (options.previous_placement().empty()) return own;
  std::set<std::string> present;
  for (const v1::Device& device : cluster.devices()) present.insert(device.name());
  std::set<std::string> departed(options.departed_devices().begin(), options.departed_devices().end());
  for (const auto& [op, device] : options.previous_placement()) {
    if (present.count(device) == 0) departed.insert(device);
  }
  own.clear_departed_devices();
  for (const std::string& name : departed) own.add_departed_devices(name);
  return own;
}

absl::StatusOr<v1::PlaceRequest> CandidatePlaceRequest(const v1::RecommendRequest& request,
                                                       const v1::RecommendCandidate& row) {
  SizingCandidate candidate{row.devices(), row.data_parallel(), {}};
  std::map<std::string, int32_t> index;
  for (int32_t i = 0; i < request.cluster().devices_size(); ++i) index.emplace(request.cluster().devices(i).name(), i);
  for (const std::string& name : row.device_names()) {
    auto it = index.find(name);
    if (it == index.end()) return absl::NotFoundError(absl::StrCat("device \"", name, "\" is not in the pool"));
    candidate.pool_devices.push_back(it->second);
  }
  v1::PlaceRequest place;
  *place.mutable_graph() = request.graph();
  *place.mutable_cluster() = CandidateCluster(request.cluster(), candidate);
  *place.mutable_options() = CandidateOptions(request.options(), place.cluster(), row.data_parallel());
  return place;
}

void FillRowFromPlacement(const v1::Placement& placement, v1::RecommendCandidate* row) {
  row->set_microbatches(placement.plan().microbatches());
  row->set_max_in_flight(placement.plan().max_in_flight());
  row->set_step_ns(placement.metrics().makespan_ns());
  row->set_microbatches_per_second(placement.metrics().microbatches_per_second());
  row->set_feasible(placement.outcome() == v1::FEASIBLE);
  row->set_winner(placement.provenance().winner().empty() ? placement.provenance().algorithm()
                                                          : placement.provenance().winner());
  row->set_time_limit_ns(placement.provenance().time_limit_ns());
  row->set_time_limited(placement.provenance().time_limited());
}

absl::Duration RefineShare(absl::Duration budget, int32_t workers) {
  const int32_t lanes = std::max(1, workers);
  const int64_t share_ns =
      absl::ToInt64Nanoseconds(budget) * kRefinePercent * lanes / (100 * std::max(2, lanes));
  return std::min(budget, std::max(absl::Milliseconds(1), absl::Nanoseconds(share_ns)));
}

absl::Duration FirstRoundShare(absl::Duration budget, int32_t workers, int32_t candidates) {
  const int64_t whole_ns = absl::ToInt64Nanoseconds(budget) * std::max(1, workers) / std::max(1, candidates);
  int64_t share_ns = whole_ns * kFirstRoundPercent / 100;
  // Few candidates: a second solve would be no longer than the first, so the first takes it all.
  if (absl::Nanoseconds(share_ns) >= RefineShare(budget, workers)) share_ns = whole_ns;
  return std::min(budget, std::max(absl::Milliseconds(1), absl::Nanoseconds(share_ns)));
}

absl::Duration SecondRoundShare(absl::Duration budget, int32_t workers, absl::Duration first_share,
                                absl::Duration left, absl::Duration overrun, int32_t contenders) {
  if (left == absl::InfiniteDuration()) return RefineShare(budget, workers);
  const int64_t lanes = std::max(1, workers);
  const int64_t waves = (std::max(1, contenders) + lanes - 1) / lanes;
  const absl::Duration usable = left - budget * kReservePercent / 100;
  const absl::Duration share = (usable - waves * std::max(overrun, absl::ZeroDuration())) / waves;
  return share > first_share ? share : absl::ZeroDuration();
}

std::vector<int32_t> RowsToRefine(const v1::RecommendRequest& request, const v1::RecommendResponse& response,
                                  absl::Duration first_share, int32_t workers) {
  const int32_t chosen = response.recommended();
  if (chosen < 0) return {};
  const auto& rows = response.candidates();
  const auto throughput = [&rows](int32_t i) { return rows[i].microbatches_per_second(); };
  const auto per_device = [&rows](int32_t i) { return ThroughputPerDevice(rows[i]); };
  double fastest = 0.0;
  for (const v1::RecommendCandidate& row : rows) {
    if (row.feasible() && !row.has_error()) fastest = std::max(fastest, row.microbatches_per_second());
  }
  const double near = 1.0 - kContenderPercent / 100.0;
  const auto contends = [&](int32_t i) {
    switch (request.objective()) {
      case v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN:
        return throughput(i) >= fastest * near ||
               (rows[i].devices() <= rows[chosen].devices() &&
                throughput(i) >= fastest * (1.0 - (request.within_percent() + kContenderPercent) / 100.0));
      case v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE:
        return per_device(i) >= per_device(chosen) * near;
      default:
        return throughput(i) >= throughput(chosen) * near;
    }
  };
  // A row already solved with more than the first round's share means a second round was run for this
  // graph and pool (this question's, or another objective's on the same candidates): nothing more is
  // refined. A repeat, which finds the longer answers in the cache, must pick no rows at all, and what
  // it sees differs from what the first call chose from — a second solve may have come out slower than
  // the first (time-limited solves depend on timing), so rows it had beaten may now contend, or so much
  // faster that the rows it was close to no longer do. The price: a call with another objective on a
  // cache warm from the first refines nothing of its own.
  const int64_t first_ns = absl::ToInt64Nanoseconds(first_share);
  for (const v1::RecommendCandidate& row : rows) {
    if (row.time_limit_ns() > first_ns) return {};
  }
  // The recommended row first, then the other contenders best first on the objective's figure (the
  // fewest-devices objective: the fastest first, which sets the bar), then row order; the first
  // max(2, workers) of them decide. Of those, the ones cut short are refined.
  std::vector<int32_t> ranked;
  for (int32_t i = 0; i < rows.size(); ++i) {
    if (rows[i].feasible() && !rows[i].has_error() && contends(i)) ranked.push_back(i);
  }
  const bool by_device = request.objective() == v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE;
  std::stable_sort(ranked.begin(), ranked.end(), [&](int32_t a, int32_t b) {
    if ((a == chosen) != (b == chosen)) return a == chosen;
    return by_device ? per_device(a) > per_device(b) : throughput(a) > throughput(b);
  });
  const size_t most = static_cast<size_t>(std::max(2, workers));
  if (ranked.size() > most) ranked.resize(most);
  std::vector<int32_t> picked;
  for (const int32_t i : ranked) {
    if (rows[i].time_limited()) picked.push_back(i);
  }
  return picked;
}

void CompleteRecommendation(const v1::RecommendRequest& request, v1::RecommendResponse* response) {
  double one_device = 0.0;
  for (const v1::RecommendCandidate& row : response->candidates()) {
    if (row.devices() == 1 && !row.has_error()) {
      one_device = row.microbatches_per_second();
      break;
    }
  }
  for (v1::RecommendCandidate& row : *response->mutable_candidates()) {
    if (row.has_error() || one_device <= 0.0) continue;
    row.set_speedup(row.microbatches_per_second() / one_device);
    row.set_efficiency(row.speedup() / row.devices());
  }
  response->set_recommended(-1);
  if (request.submit_only()) {
    response->set_reason("submit_only: the candidates run as operations; ask again once they are done");
    return;
  }
  const auto& rows = response->candidates();
  double fastest = 0.0;
  int32_t fastest_row = -1;
  for (int32_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].feasible() || rows[i].has_error()) continue;
    // Rows go by count, then D, ascending: the first of equals has fewer devices, then fewer replicas.
    if (fastest_row < 0 || rows[i].microbatches_per_second() > fastest) {
      fastest = rows[i].microbatches_per_second();
      fastest_row = i;
    }
  }
  if (fastest_row < 0) {
    response->set_reason("no candidate fits its devices' memory");
    return;
  }
  int32_t chosen = fastest_row;
  std::string why;
  switch (request.objective()) {
    case v1::RECOMMEND_OBJECTIVE_FEWEST_DEVICES_WITHIN: {
      const double floor = fastest * (1.0 - request.within_percent() / 100.0);
      for (int32_t i = 0; i < rows.size(); ++i) {
        if (!rows[i].feasible() || rows[i].has_error() || rows[i].microbatches_per_second() < floor) continue;
        const v1::RecommendCandidate& best = rows[chosen];
        if (rows[i].devices() < best.devices() ||
            (rows[i].devices() == best.devices() &&
             rows[i].microbatches_per_second() > best.microbatches_per_second())) {
          chosen = i;
        }
      }
      why = absl::StrCat("fewest devices within ", request.within_percent(), " % of the fastest (",
                         Describe(rows[fastest_row]), "): ", Describe(rows[chosen]));
      break;
    }
    case v1::RECOMMEND_OBJECTIVE_BEST_PER_DEVICE: {
      const auto per_device = [&rows](int32_t i) { return ThroughputPerDevice(rows[i]); };
      for (int32_t i = 0; i < rows.size(); ++i) {
        if (!rows[i].feasible() || rows[i].has_error()) continue;
        if (per_device(i) > per_device(chosen) ||
            (per_device(i) == per_device(chosen) &&
             rows[i].microbatches_per_second() > rows[chosen].microbatches_per_second())) {
          chosen = i;
        }
      }
      why = absl::StrCat("best throughput per device (", Throughput(per_device(chosen)), " each): ",
                         Describe(rows[chosen]));
      break;
    }
    default:
      why = absl::StrCat("fastest: ", Describe(rows[chosen]));
      break;
  }
  response->set_recommended(chosen);
  response->set_reason(why);
}

}  // namespace placement::core
