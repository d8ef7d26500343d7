#include "service/engine/stages/ideal_lattice.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace placement::engine::stages {
namespace {

// splitmix64: a fixed random code per element, so a set's hash is the XOR of its elements' codes and
// adding an element updates it in O(1).
uint64_t ElementCode(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL * (x + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::optional<IdealLattice> IdealLattice::Enumerate(const StageProblem& problem, int64_t max_ideals) {
  const int32_t n = problem.num_elements;
  IdealLattice lattice;
  lattice.words_ = std::max(1, (n + 63) / 64);
  const int32_t words = lattice.words_;
  std::vector<uint64_t> code(n);
  for (int32_t v = 0; v < n; ++v) code[v] = ElementCode(static_cast<uint64_t>(v));

  std::vector<uint64_t>& bits = lattice.bits_;
  std::vector<uint64_t> hash;            // per ideal
  std::vector<int32_t> next_same_hash;   // per ideal: chain of ideals sharing a hash
  absl::flat_hash_map<uint64_t, int32_t> first_with_hash;
  struct Triple {
    int32_t ideal, removed, sub;
  };
  std::vector<Triple> triples;

  bits.assign(words, 0);
  hash.push_back(0);
  next_same_hash.push_back(-1);
  first_with_hash[0] = 0;

  std::vector<uint64_t> candidate(words);
  // Ideals are appended level by level, so scanning them in id order visits every level in turn.
  for (int32_t id = 0; id < static_cast<int32_t>(hash.size()); ++id) {
    for (int32_t v = 0; v < n; ++v) {
      const uint64_t* ideal = bits.data() + static_cast<size_t>(id) * words;
      if ((ideal[v >> 6] >> (v & 63)) & 1) continue;
      bool addable = true;
      for (int32_t k = problem.pred_offset[v]; k < problem.pred_offset[v + 1] && addable; ++k) {
        const int32_t u = problem.pred[k];
        addable = ((ideal[u >> 6] >> (u & 63)) & 1) != 0;
      }
      if (!addable) continue;
      std::copy(ideal, ideal + words, candidate.begin());
      candidate[v >> 6] |= uint64_t{1} << (v & 63);
      const uint64_t h = hash[id] ^ code[v];
      int32_t found = -1;
      auto it = first_with_hash.find(h);
      if (it != first_with_hash.end()) {
        for (int32_t other = it->second; other != -1; other = next_same_hash[other]) {
          if (std::equal(candidate.begin(), candidate.end(),
                         bits.begin() + static_cast<size_t>(other) * words)) {
            found = other;
            break;
          }
        }
      }
      if (found == -1) {
        if (static_cast<int64_t>(hash.size()) >= max_ideals) return std::nullopt;
        found = static_cast<int32_t>(hash.size());
        bits.insert(bits.end(), candidate.begin(), candidate.end());
        hash.push_back(h);
        if (it != first_with_hash.end()) {
          next_same_hash.push_back(it->second);
          it->second = found;
        } else {
          next_same_hash.push_back(-1);
          first_with_hash.emplace(h, found);
        }
      }
      triples.push_back({found, v, id});
    }
  }
  const int32_t count = static_cast<int32_t>(hash.size());
  lattice.child_offset_.assign(static_cast<size_t>(count) + 1, 0);
  for (const Triple& t : triples) ++lattice.child_offset_[t.ideal + 1];
  for (int32_t i = 0; i < count; ++i) lattice.child_offset_[i + 1] += lattice.child_offset_[i];
  lattice.children_.resize(triples.size());
  std::vector<int64_t> fill(lattice.child_offset_.begin(), lattice.child_offset_.end() - 1);
  for (const Triple& t : triples) lattice.children_[fill[t.ideal]++] = Child{t.removed, t.sub};
  return lattice;
}

}  // namespace placement::engine::stages
