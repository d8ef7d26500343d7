// model_builder.cc — validation of a PlaceRequest and construction of the compact Model.
//
// One pass per list of the request, in this order: devices (names, kinds, nodes, memory, speed), links,
// ops (names sorted once to get canonical ids, costs, pins, kinds), edges (ranges, self-loops, bytes),
// then, on the canonical ids, CSR adjacency with parallel edges merged, the topological order (which also
// finds cycles), colocation groups and the overflow bounds. Every problem found is reported; a check that
// would only repeat an earlier problem (a cycle when an edge is already broken, a group conflict when a
// member's own pin is unknown) is skipped.
//
// Performance: a 1M-op / 3M-edge request is validated and built in a few hundred milliseconds. Hot loops
// use flat arrays indexed by id; strings are only touched to sort op names once (with an 8-byte prefix key
// so most comparisons never leave the key array) and to resolve pins / kinds / groups.

#include "service/engine/model/model_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/duration.pb.h"
#include "service/status_payloads/status_payloads.h"

namespace placement::engine {
namespace {

// Longest part of a user-supplied string quoted in a message.
constexpr size_t kMaxQuotedBytes = 64;
// Kind ids must fit the 64-bit allowed_kind_mask.
constexpr int32_t kMaskBits = 64;
// How many iterations ahead loops that write at random positions prefetch their targets.
constexpr int32_t kPrefetchDistance = 16;

// "name" with C escapes, cut after kMaxQuotedBytes bytes so hostile names cannot blow up the message.
std::string Quote(absl::string_view s) {
  if (s.size() <= kMaxQuotedBytes) return absl::StrCat("\"", absl::CHexEscape(s), "\"");
  return absl::StrCat("\"", absl::CHexEscape(s.substr(0, kMaxQuotedBytes)), "...\"");
}

std::string OpPath(int64_t r, absl::string_view field) {
  return absl::StrCat("graph.ops[", r, "].", field);
}
std::string EdgePath(int64_t i, absl::string_view field) {
  return absl::StrCat("graph.edges[", i, "].", field);
}
std::string DevicePath(int64_t d, absl::string_view field) {
  return absl::StrCat("cluster.devices[", d, "].", field);
}
std::string LinkPath(int64_t i, absl::string_view field) {
  return field.empty() ? absl::StrCat("cluster.links[", i, "]")
                       : absl::StrCat("cluster.links[", i, "].", field);
}

// Violations of one list of the request. Capped so that a request with a million bad entries still gets
// a bounded message: once Full(), the caller stops scanning the list.
class ViolationList {
 public:
  ViolationList(std::string list_path, int32_t cap) : list_path_(std::move(list_path)), cap_(cap) {}

  void Add(std::string field, std::string description) {
    if (full_) return;
    if (static_cast<int64_t>(items_.size()) >= cap_) {
      items_.push_back({list_path_, absl::StrCat("more than ", cap_, " problems; stopped checking ",
                                                 list_path_)});
      full_ = true;
      return;
    }
    items_.push_back({std::move(field), std::move(description)});
  }
  bool Full() const { return full_; }
  bool empty() const { return items_.empty(); }
  void AppendTo(std::vector<FieldViolation>* out) {
    for (FieldViolation& v : items_) out->push_back(std::move(v));
    items_.clear();
  }

 private:
  std::string list_path_;
  int64_t cap_;
  std::vector<FieldViolation> items_;
  bool full_ = false;
};

// Stable LSD radix sort of `items` by bits [low_bit, high_bit) of key(item). Each pass streams through
// the array and writes into at most 2^kMaxDigitBits sequential outputs, which is far kinder to the cache
// than scattering by id; digits on which every item agrees are skipped. `scratch` is reused storage.
constexpr int kMaxDigitBits = 11;

template <typename T, typename KeyFn>
void RadixSort(std::vector<T>& items, std::vector<T>& scratch, int low_bit, int high_bit, KeyFn key) {
  const size_t n = items.size();
  if (n < 2 || high_bit <= low_bit) return;
  const int total_bits = high_bit - low_bit;
  const uint64_t total_mask = total_bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << total_bits) - 1;
  const int passes = (total_bits + kMaxDigitBits - 1) / kMaxDigitBits;
  const int digit_bits = (total_bits + passes - 1) / passes;
  const size_t buckets = size_t{1} << digit_bits;
  const uint64_t digit_mask = buckets - 1;
  auto digit = [&](const T& item, int pass) {
    return static_cast<size_t>(((((key(item) >> low_bit) & total_mask) >> (pass * digit_bits)) &
                                digit_mask));
  };
  // All histograms in one read pass.
  std::vector<size_t> counts(static_cast<size_t>(passes) * buckets, 0);
  for (const T& item : items) {
    const uint64_t k = (key(item) >> low_bit) & total_mask;
    for (int pass = 0; pass < passes; ++pass) {
      ++counts[pass * buckets + ((k >> (pass * digit_bits)) & digit_mask)];
    }
  }
  scratch.resize(n);
  for (int pass = 0; pass < passes; ++pass) {
    size_t* count = &counts[pass * buckets];
    if (count[digit(items[0], pass)] == n) continue;
    size_t sum = 0;
    for (size_t b = 0; b < buckets; ++b) {
      const size_t c = count[b];
      count[b] = sum;
      sum += c;
    }
    for (const T& item : items) scratch[count[digit(item, pass)]++] = item;
    items.swap(scratch);
  }
}

// Sorts op indices by (name in byte order, index) and finds duplicate names.
//
// Names live in scattered protobuf strings, so comparing them directly costs a cache miss per operand.
// Instead each op gets a key with the next 8 name bytes (big-endian, zero padded) and how many bytes the
// name has left (capped at 9); keys sort as integers, and only groups that agree on a whole block go one
// block deeper (small groups prefetch their names' next block first). The radix sort does the first
// block for everyone; groups that still agree after 64 bytes finish with a plain comparison sort.
class NameSorter {
 public:
  explicit NameSorter(const std::vector<absl::string_view>& names) : names_(names) {}

  // order[c] = index of the op with the c-th smallest (name, index); duplicates = {index, index of the
  // first op with the same non-empty name}, sorted by index.
  void Sort(std::vector<int32_t>* order, std::vector<std::pair<int32_t, int32_t>>* duplicates) {
    const int32_t n = static_cast<int32_t>(names_.size());
    std::vector<Key> keys(n);
    for (int32_t i = 0; i < n; ++i) keys[i] = KeyAt(i, 0);
    {
      std::vector<Key> scratch;
      RadixSort(keys, scratch, 0, 64, [](const Key& k) { return k.block; });
    }
    for (int32_t begin = 0; begin < n;) {
      int32_t end = begin + 1;
      while (end < n && keys[end].block == keys[begin].block) ++end;
      // The group agrees on the first block; re-keying at offset 0 adds the lengths, then it goes on
      // at offset 8 where needed.
      if (end - begin > 1) SortGroup(keys.data() + begin, keys.data() + end, 0);
      begin = end;
    }
    order->resize(n);
    for (int32_t i = 0; i < n; ++i) (*order)[i] = keys[i].index;
    std::sort(duplicates_.begin(), duplicates_.end());
    *duplicates = std::move(duplicates_);
  }

 private:
  struct Key {
    uint64_t block;  // name bytes [offset, offset + 8), big-endian, zero padded
    int32_t rest;    // min(bytes of the name from offset on, 9): 9 = continues past the block
    int32_t index;
  };
  static constexpr int32_t kSmallGroup = 32;
  static constexpr size_t kMaxKeyedOffset = 64;

  Key KeyAt(int32_t index, size_t offset) const {
    const absl::string_view s = names_[index];
    const size_t rest = s.size() > offset ? s.size() - offset : 0;
    const size_t k = std::min<size_t>(8, rest);
    uint64_t block = 0;
    for (size_t j = 0; j < k; ++j) {
      block |= static_cast<uint64_t>(static_cast<unsigned char>(s[offset + j])) << (56 - 8 * j);
    }
    return {block, static_cast<int32_t>(std::min<size_t>(rest, 9)), index};
  }

  // Sorts [begin, end), whose names agree on their first `offset` bytes (zero padded).
  void SortGroup(Key* begin, Key* end, size_t offset) {
    // Past a few blocks, shared prefixes are long enough that plain comparison is the cheaper way.
    if (offset >= kMaxKeyedOffset) {
      SortSmallGroup(begin, end);
      return;
    }
    if (end - begin <= kSmallGroup) {
      for (Key* k = begin; k != end; ++k) {
        const absl::string_view name = names_[k->index];
        if (name.size() > offset) __builtin_prefetch(name.data() + offset);
      }
    }
    for (Key* k = begin; k != end; ++k) *k = KeyAt(k->index, offset);
    std::sort(begin, end, [](const Key& a, const Key& b) {
      if (a.block != b.block) return a.block < b.block;
      if (a.rest != b.rest) return a.rest < b.rest;  // zero padding: the shorter name is a prefix
      return a.index < b.index;
    });
    for (Key* first = begin; first != end;) {
      Key* last = first + 1;
      while (last != end && last->block == first->block && last->rest == first->rest) ++last;
      if (last - first > 1) {
        if (first->rest == 9) {
          SortGroup(first, last, offset + 8);
        } else if (offset + first->rest > 0) {  // identical names (empty ones are reported apart)
          for (Key* k = first + 1; k != last; ++k) duplicates_.push_back({k->index, first->index});
        }
      }
      first = last;
    }
  }

  void SortSmallGroup(Key* begin, Key* end) {
    for (Key* k = begin; k != end; ++k) __builtin_prefetch(names_[k->index].data());
    const std::vector<absl::string_view>& names = names_;
    std::sort(begin, end, [&names](const Key& a, const Key& b) {
      const int c = names[a.index].compare(names[b.index]);
      return c != 0 ? c < 0 : a.index < b.index;
    });
    for (Key* first = begin; first != end;) {
      Key* last = first + 1;
      while (last != end && names_[last->index] == names_[first->index]) ++last;
      if (!names_[first->index].empty()) {
        for (Key* k = first + 1; k != last; ++k) duplicates_.push_back({k->index, first->index});
      }
      first = last;
    }
  }

  const std::vector<absl::string_view>& names_;
  std::vector<std::pair<int32_t, int32_t>> duplicates_;
};

// A set of ids in [0, n) with insert and extract-min in O(log64 n): a 64-ary tree of bit words (level 0
// holds one bit per id, a bit of level k+1 says "word i of level k is not empty"). For a million ids it
// is ~130 KB and stays in cache, unlike a binary heap's unpredictable sift paths.
class MinIdSet {
 public:
  explicit MinIdSet(int32_t n) {
    size_t words = (static_cast<size_t>(std::max(n, 1)) + 63) / 64;
    levels_.emplace_back(words, 0);
    while (words > 1) {
      words = (words + 63) / 64;
      levels_.emplace_back(words, 0);
    }
  }
  bool empty() const { return levels_.back()[0] == 0; }
  void Insert(int32_t id) {
    size_t i = static_cast<size_t>(id);
    for (std::vector<uint64_t>& level : levels_) {
      uint64_t& word = level[i >> 6];
      const bool was_empty = word == 0;
      word |= uint64_t{1} << (i & 63);
      if (!was_empty) return;
      i >>= 6;
    }
  }
  int32_t PopMin() {
    size_t i = 0;
    for (size_t l = levels_.size(); l-- > 0;) {
      i = (i << 6) | static_cast<size_t>(__builtin_ctzll(levels_[l][i]));
    }
    const int32_t id = static_cast<int32_t>(i);
    for (std::vector<uint64_t>& level : levels_) {
      uint64_t& word = level[i >> 6];
      word &= ~(uint64_t{1} << (i & 63));
      if (word != 0) break;
      i >>= 6;
    }
    return id;
  }

 private:
  std::vector<std::vector<uint64_t>> levels_;
};

// One edge during construction: key = (src << id_bits) | dst (or the reverse), and its bytes.
struct EdgeRecord {
  uint64_t key;
  int64_t bytes;
};

// Number of bits needed to hold every value in [0, n).
int BitWidth(int64_t n) {
  int bits = 1;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

// floor(memory_bytes * (1 - headroom)) for headroom in [0, 1).
//
// The headroom is a binary double, so 0.1 is really 0.1000000000000000055...; taken literally, 1000 bytes
// with headroom 0.1 would give 899. Callers mean the decimal value, so a product within two double ulps of
// an integer is taken to be that integer (1000 * (1 - 0.1) = 900). Long double keeps the product itself
// exact to well below that tolerance for every memory size the limits allow.
int64_t CapacityBytes(int64_t memory_bytes, double headroom) {
  if (headroom == 0.0) return memory_bytes;
  const long double exact =
      static_cast<long double>(memory_bytes) * (1.0L - static_cast<long double>(headroom));
  const long double nearest = std::roundl(exact);
  const long double tolerance = exact * 0x1p-52L;
  long double result = std::fabs(exact - nearest) <= tolerance ? nearest : std::floor(exact);
  result = std::clamp<long double>(result, 0.0L, static_cast<long double>(memory_bytes));
  return static_cast<int64_t>(result);
}

// Description of a count outside [0, max] ("" when it is fine).
std::string CheckAmount(int64_t value, int64_t max, absl::string_view unit) {
  if (value < 0) return absl::StrCat("must be >= 0 (got ", value, ")");
  if (value > max) {
    return absl::StrCat(value, " exceeds the limit of ", max, " ", unit);
  }
  return "";
}

class Builder {
 public:
  Builder(const v1::Graph& graph, const v1::Cluster& cluster, double headroom,
          const ModelLimits& limits, const v1::PlacementOptions* options = nullptr)
      : graph_(graph),
        cluster_(cluster),
        headroom_(headroom),
        options_message_(options),
        limits_(limits),
        ops_(std::string("graph.ops"), limits.max_violations_per_list),
        edges_(std::string("graph.edges"), limits.max_violations_per_list),
        devices_(std::string("cluster.devices"), limits.max_violations_per_list),
        links_(std::string("cluster.links"), limits.max_violations_per_list),
        graph_misc_(std::string("graph"), limits.max_violations_per_list),
        cluster_misc_(std::string("cluster"), limits.max_violations_per_list),
        options_(std::string("options"), limits.max_violations_per_list),
        previous_(std::string("options.previous_placement"), limits.max_violations_per_list) {}

  absl::StatusOr<Model> Run(const google::protobuf::Duration* time_limit,
                            std::vector<FieldViolation>* violations) {
    CheckOptions(time_limit);
    BuildDevices();
    BuildLinks();
    BuildOps();
    BuildEdges();
    BuildGroups();
    CheckPlan();
    CheckPreviousPlacement();
    const bool valid = ops_.empty() && edges_.empty() && devices_.empty() && links_.empty() &&
                       graph_misc_.empty() && cluster_misc_.empty() && options_.empty() &&
                       previous_.empty();
    if (valid) CheckOncePerStep();
    if (valid && ops_.empty()) CheckTotals();

    std::vector<FieldViolation> all;
    ops_.AppendTo(&all);
    edges_.AppendTo(&all);
    graph_misc_.AppendTo(&all);
    devices_.AppendTo(&all);
    cluster_misc_.AppendTo(&all);
    links_.AppendTo(&all);
    options_.AppendTo(&all);
    previous_.AppendTo(&all);
    if (!all.empty()) {
      absl::Status status = ViolationsError(all);
      if (violations != nullptr) *violations = std::move(all);
      return status;
    }
    if (violations != nullptr) violations->clear();
    for (DeviceId d = 0; d < model_.num_devices(); ++d) {
      model_.capacity_bytes[d] = CapacityBytes(model_.memory_bytes[d], headroom_);
    }
    // -0.0 passes the range check; store +0.0 so that the digest sees one value.
    model_.memory_headroom = headroom_ == 0.0 ? 0.0 : headroom_;
    model_.cluster_devices = model_.num_devices();
    return std::move(model_);
  }

 private:
  void CheckOptions(const google::protobuf::Duration* time_limit) {
    if (std::isnan(headroom_) || headroom_ < 0.0 || headroom_ >= 1.0) {
      options_.Add("options.memory_headroom",
                   absl::StrFormat("must be in [0, 1) (got %g)", headroom_));
    }
    if (time_limit == nullptr) return;
    const int64_t seconds = time_limit->seconds();
    const int32_t nanos = time_limit->nanos();
    // google.protobuf.Duration: |seconds| <= 315576000000, |nanos| < 1e9, and both with the same sign.
    const bool well_formed = seconds >= -315'576'000'000 && seconds <= 315'576'000'000 &&
                             nanos > -1'000'000'000 && nanos < 1'000'000'000 &&
                             !(seconds > 0 && nanos < 0) && !(seconds < 0 && nanos > 0);
    if (!well_formed) {
      options_.Add("options.time_limit",
                   absl::StrCat("not a valid Duration (seconds=", seconds, ", nanos=", nanos, ")"));
    } else if (seconds < 0 || nanos < 0) {
      options_.Add("options.time_limit",
                   absl::StrCat("must not be negative (got seconds=", seconds, ", nanos=", nanos, ")"));
    }
  }

  // ---- Devices ----------------------------------------------------------------------------------

  void BuildDevices() {
    const int64_t num_devices = cluster_.devices_size();
    if (num_devices == 0) {
      devices_.Add("cluster.devices", "the cluster has no devices");
      return;
    }
    if (num_devices > limits_.max_devices) {
      devices_.Add("cluster.devices", absl::StrCat(num_devices, " devices exceed the limit of ",
                                                   limits_.max_devices));
      return;
    }
    const int32_t d_count = static_cast<int32_t>(num_devices);
    model_.device_name.resize(d_count);
    model_.device_kind.resize(d_count);
    model_.device_node.resize(d_count);
    model_.memory_bytes.resize(d_count);
    model_.capacity_bytes.resize(d_count);
    model_.speed.resize(d_count);
    device_by_name_.reserve(d_count);
    absl::flat_hash_map<absl::string_view, int32_t> node_by_name;
    for (int32_t d = 0; d < d_count && !devices_.Full(); ++d) {
      const v1::Device& device = cluster_.devices(d);
      const std::string& name = device.name();
      if (name.empty()) {
        devices_.Add(DevicePath(d, "name"), "must not be empty");
      } else if (static_cast<int64_t>(name.size()) > limits_.max_name_bytes) {
        devices_.Add(DevicePath(d, "name"), absl::StrCat("is ", name.size(),
                                                         " bytes long; the limit is ",
                                                         limits_.max_name_bytes));
      } else {
        auto [it, inserted] = device_by_name_.try_emplace(name, d);
        if (!inserted) {
          devices_.Add(DevicePath(d, "name"), absl::StrCat("duplicate of cluster.devices[", it->second,
                                                           "].name ", Quote(name)));
        }
      }
      model_.device_name[d] = name;

      if (static_cast<int64_t>(device.kind().size()) > limits_.max_name_bytes) {
        devices_.Add(DevicePath(d, "kind"), absl::StrCat("is ", device.kind().size(),
                                                         " bytes long; the limit is ",
                                                         limits_.max_name_bytes));
      }
      auto [kind_it, new_kind] =
          kind_by_name_.try_emplace(device.kind(), static_cast<int32_t>(model_.kind_name.size()));
      if (new_kind) model_.kind_name.push_back(device.kind());
      model_.device_kind[d] = kind_it->second;

      if (static_cast<int64_t>(device.node().size()) > limits_.max_name_bytes) {
        devices_.Add(DevicePath(d, "node"), absl::StrCat("is ", device.node().size(),
                                                         " bytes long; the limit is ",
                                                         limits_.max_name_bytes));
      }
      auto [node_it, new_node] =
          node_by_name.try_emplace(device.node(), static_cast<int32_t>(model_.node_name.size()));
      if (new_node) model_.node_name.push_back(device.node());
      model_.device_node[d] = node_it->second;

      const int64_t memory = device.memory_bytes();
      if (memory <= 0) {
        devices_.Add(DevicePath(d, "memory_bytes"), absl::StrCat("must be > 0 (got ", memory, ")"));
      } else if (memory > limits_.max_bytes) {
        devices_.Add(DevicePath(d, "memory_bytes"),
                     absl::StrCat(memory, " exceeds the limit of ", limits_.max_bytes, " bytes"));
      }
      model_.memory_bytes[d] = memory;

      const double speed = device.has_speed() ? device.speed() : 1.0;
      if (!std::isfinite(speed)) {
        devices_.Add(DevicePath(d, "speed"), absl::StrFormat("must be finite (got %g)", speed));
      } else if (speed <= 0.0) {
        devices_.Add(DevicePath(d, "speed"), absl::StrFormat("must be > 0 (got %g)", speed));
      } else if (speed < limits_.min_speed || speed > limits_.max_speed) {
        devices_.Add(DevicePath(d, "speed"), absl::StrFormat("%g is outside [%g, %g]", speed,
                                                             limits_.min_speed, limits_.max_speed));
      }
      model_.speed[d] = speed;
    }
    if (devices_.Full()) return;
    devices_usable_ = true;
    const int32_t max_kinds = std::min(limits_.max_device_kinds, kMaskBits);
    if (static_cast<int32_t>(model_.kind_name.size()) > max_kinds) {
      devices_.Add("cluster.devices", absl::StrCat(model_.kind_name.size(),
                                                   " distinct device kinds exceed the limit of ",
                                                   max_kinds));
    } else {
      kinds_usable_ = true;
    }
  }

  // ---- Links ------------------------------------------------------------------------------------

  void CheckLatency(const std::string& path, int64_t latency) {
    const std::string problem = CheckAmount(latency, limits_.max_time_ns, "ns");
    if (!problem.empty()) cluster_misc_.Add(path, problem);
  }

  void BuildLinks() {
    const v1::LinkSpec& intra = cluster_.intra_node();
    const v1::LinkSpec& inter = cluster_.inter_node();
    CheckLatency("cluster.intra_node.latency_ns", intra.latency_ns());
    CheckLatency("cluster.inter_node.latency_ns", inter.latency_ns());
    if (!devices_usable_) return;

    const int32_t n = model_.num_devices();
    const LinkCost intra_cost{intra.bandwidth_bytes_per_second(), intra.latency_ns()};
    const LinkCost inter_cost{inter.bandwidth_bytes_per_second(), inter.latency_ns()};
    model_.link.assign(static_cast<size_t>(n) * n, LinkCost());
    for (int32_t a = 0; a < n; ++a) {
      for (int32_t b = 0; b < n; ++b) {
        if (a == b) continue;
        model_.link[static_cast<size_t>(a) * n + b] =
            model_.device_node[a] == model_.device_node[b] ? intra_cost : inter_cost;
      }
    }
    // overridden[a * n + b] = index of the link that overrides the pair, or -1.
    std::vector<int32_t> overridden;
    if (cluster_.links_size() > 0) overridden.assign(static_cast<size_t>(n) * n, -1);
    for (int32_t i = 0; i < cluster_.links_size() && !links_.Full(); ++i) {
      const v1::Link& link = cluster_.links(i);
      const DeviceId a = LookupLinkEnd(i, "a", link.a());
      const DeviceId b = LookupLinkEnd(i, "b", link.b());
      const v1::LinkSpec& spec = link.spec();
      if (spec.bandwidth_bytes_per_second() <= 0) {
        links_.Add(LinkPath(i, "spec.bandwidth_bytes_per_second"),
                   absl::StrCat("must be > 0 (got ", spec.bandwidth_bytes_per_second(), ")"));
      }
      const std::string latency_problem = CheckAmount(spec.latency_ns(), limits_.max_time_ns, "ns");
      if (!latency_problem.empty()) links_.Add(LinkPath(i, "spec.latency_ns"), latency_problem);
      if (a == kNone || b == kNone) continue;
      if (a == b) {
        links_.Add(LinkPath(i, "b"), absl::StrCat("same device as a (", Quote(link.a()), ")"));
        continue;
      }
      int32_t& previous = overridden[static_cast<size_t>(a) * n + b];
      if (previous >= 0) {
        links_.Add(LinkPath(i, ""), absl::StrCat("duplicate of cluster.links[", previous,
                                                 "] (devices ", Quote(link.a()), " and ",
                                                 Quote(link.b()), ")"));
        continue;
      }
      previous = i;
      overridden[static_cast<size_t>(b) * n + a] = i;
      const LinkCost cost{spec.bandwidth_bytes_per_second(), spec.latency_ns()};
      model_.link[static_cast<size_t>(a) * n + b] = cost;
      model_.link[static_cast<size_t>(b) * n + a] = cost;
    }
    if (links_.Full()) return;

    // A default link spec only needs a bandwidth when some device pair actually uses it.
    CheckDefaultBandwidth(intra, /*same_node=*/true, overridden);
    CheckDefaultBandwidth(inter, /*same_node=*/false, overridden);
  }

  DeviceId LookupLinkEnd(int32_t i, absl::string_view field, const std::string& name) {
    auto it = device_by_name_.find(name);
    if (it == device_by_name_.end()) {
      links_.Add(LinkPath(i, field), absl::StrCat("unknown device ", Quote(name)));
      return kNone;
    }
    return it->second;
  }

  void CheckDefaultBandwidth(const v1::LinkSpec& spec, bool same_node,
                             const std::vector<int32_t>& overridden) {
    if (spec.bandwidth_bytes_per_second() > 0) return;
    const int32_t n = model_.num_devices();
    for (int32_t a = 0; a < n; ++a) {
      for (int32_t b = a + 1; b < n; ++b) {
        if ((model_.device_node[a] == model_.device_node[b]) != same_node) continue;
        if (!overridden.empty() && overridden[static_cast<size_t>(a) * n + b] >= 0) continue;
        const std::string path = absl::StrCat(same_node ? "cluster.intra_node" : "cluster.inter_node",
                                              ".bandwidth_bytes_per_second");
        cluster_misc_.Add(path, absl::StrCat(
                                    "must be > 0 (got ", spec.bandwidth_bytes_per_second(),
                                    "): devices ", Quote(model_.device_name[a]), " and ",
                                    Quote(model_.device_name[b]), " use it"));
        return;
      }
    }
  }

  // ---- Ops --------------------------------------------------------------------------------------

  void BuildOps() {
    const int64_t num_ops = graph_.ops_size();
    if (num_ops == 0) {
      ops_.Add("graph.ops", "the graph has no ops");
      return;
    }
    if (num_ops > limits_.max_ops) {
      ops_.Add("graph.ops", absl::StrCat(num_ops, " ops exceed the limit of ", limits_.max_ops));
      return;
    }
    const int32_t n = static_cast<int32_t>(num_ops);
    // duplicates[k] = {request index, request index of the first op with that name}, by request index.
    std::vector<std::pair<int32_t, int32_t>> duplicates;
    {
      std::vector<absl::string_view> names(n);
      for (int32_t r = 0; r < n; ++r) names[r] = graph_.ops(r).name();
      NameSorter(names).Sort(&model_.request_index, &duplicates);
    }
    model_.op_of_request_index.resize(n);
    for (OpId c = 0; c < n; ++c) model_.op_of_request_index[model_.request_index[c]] = c;

    model_.op_name.resize(n);
    model_.op_type.resize(n);
    model_.compute_ns.resize(n);
    model_.output_bytes.resize(n);
    model_.persistent_bytes.resize(n);
    model_.temp_bytes.resize(n);
    model_.colocation_group.assign(n, kNone);
    model_.pinned_device.assign(n, kNone);
    model_.allowed_kind_mask.assign(n, 0);
    model_.once_per_step.assign(n, 0);
    constraint_error_.assign(n, 0);

    size_t next_duplicate = 0;
    for (int32_t r = 0; r < n && !ops_.Full(); ++r) {
      const v1::Op& op = graph_.ops(r);
      const OpId c = model_.op_of_request_index[r];
      // The request is read in order but the model is written in canonical order, i.e. at random:
      // announce the writes a few ops ahead so the cache misses overlap instead of queueing.
      if (r + kPrefetchDistance < n) {
        const OpId ahead = model_.op_of_request_index[r + kPrefetchDistance];
        __builtin_prefetch(&model_.op_name[ahead], 1);
        __builtin_prefetch(&model_.op_type[ahead], 1);
        __builtin_prefetch(&model_.compute_ns[ahead], 1);
        __builtin_prefetch(&model_.output_bytes[ahead], 1);
        __builtin_prefetch(&model_.persistent_bytes[ahead], 1);
        __builtin_prefetch(&model_.temp_bytes[ahead], 1);
      }
      CheckOpName(r, op.name());
      while (next_duplicate < duplicates.size() && duplicates[next_duplicate].first == r) {
        ops_.Add(OpPath(r, "name"),
                 absl::StrCat("duplicate of graph.ops[", duplicates[next_duplicate].second, "].name ",
                              Quote(op.name())));
        ++next_duplicate;
      }
      model_.op_name[c] = op.name();
      if (static_cast<int64_t>(op.type().size()) > limits_.max_name_bytes) {
        ops_.Add(OpPath(r, "type"), absl::StrCat("is ", op.type().size(), " bytes long; the limit is ",
                                                 limits_.max_name_bytes));
      }
      model_.op_type[c] = op.type();
      CheckOpAmount(r, "compute_ns", op.compute_ns(), limits_.max_time_ns, "ns");
      CheckOpAmount(r, "output_bytes", op.output_bytes(), limits_.max_bytes, "bytes");
      CheckOpAmount(r, "persistent_bytes", op.persistent_bytes(), limits_.max_bytes, "bytes");
      CheckOpAmount(r, "temp_bytes", op.temp_bytes(), limits_.max_bytes, "bytes");
      model_.compute_ns[c] = op.compute_ns();
      model_.output_bytes[c] = op.output_bytes();
      model_.persistent_bytes[c] = op.persistent_bytes();
      model_.temp_bytes[c] = op.temp_bytes();
      if (op.once_per_step()) {
        model_.once_per_step[c] = 1;
        model_.has_once_ops = true;
      }
      if (static_cast<int64_t>(op.colocation_group().size()) > limits_.max_name_bytes) {
        ops_.Add(OpPath(r, "colocation_group"),
                 absl::StrCat("is ", op.colocation_group().size(), " bytes long; the limit is ",
                              limits_.max_name_bytes));
      }
      ResolveKindsAndPin(r, c, op);
    }
    ops_usable_ = true;
    ops_scanned_ = !ops_.Full();
  }

  void CheckOpName(int32_t r, const std::string& name) {
    if (name.empty()) {
      ops_.Add(OpPath(r, "name"), "must not be empty");
    } else if (static_cast<int64_t>(name.size()) > limits_.max_name_bytes) {
      ops_.Add(OpPath(r, "name"), absl::StrCat("is ", name.size(), " bytes long; the limit is ",
                                               limits_.max_name_bytes));
    }
  }

  void CheckOpAmount(int32_t r, absl::string_view field, int64_t value, int64_t max,
                     absl::string_view unit) {
    if (value >= 0 && value <= max) return;
    ops_.Add(OpPath(r, field), CheckAmount(value, max, unit));
  }

  void ResolveKindsAndPin(int32_t r, OpId c, const v1::Op& op) {
    // Without usable devices every pin and kind would look unknown: cluster.devices already says why.
    if (!devices_usable_) return;
    uint64_t mask = 0;
    if (op.allowed_kinds_size() > 0 && kinds_usable_) {
      for (const std::string& kind : op.allowed_kinds()) {
        auto it = kind_by_name_.find(kind);
        if (it != kind_by_name_.end()) mask |= uint64_t{1} << it->second;
      }
      if (mask == 0) {
        std::string kinds;
        for (int k = 0; k < op.allowed_kinds_size() && k < 4; ++k) {
          absl::StrAppend(&kinds, k == 0 ? "" : ", ", Quote(op.allowed_kinds(k)));
        }
        if (op.allowed_kinds_size() > 4) absl::StrAppend(&kinds, ", ...");
        ops_.Add(OpPath(r, "allowed_kinds"),
                 absl::StrCat("no device has any of the allowed kinds (", kinds, ")"));
        constraint_error_[c] = 1;
      }
    }
    if (mask != 0) model_.allowed_kind_mask[c] = mask;  // mostly 0: spare the random write
    const std::string& pin = op.pinned_device();
    if (pin.empty()) return;
    auto it = device_by_name_.find(pin);
    if (it == device_by_name_.end()) {
      ops_.Add(OpPath(r, "pinned_device"), absl::StrCat("unknown device ", Quote(pin)));
      constraint_error_[c] = 1;
      return;
    }
    const DeviceId d = it->second;
    model_.pinned_device[c] = d;
    if (mask != 0 && ((mask >> model_.device_kind[d]) & 1) == 0) {
      ops_.Add(OpPath(r, "pinned_device"),
               absl::StrCat("pinned to ", Quote(pin), " of kind ",
                            Quote(model_.kind_name[model_.device_kind[d]]),
                            ", which is not among the op's allowed kinds"));
      constraint_error_[c] = 1;
    }
  }

  // ---- Edges ------------------------------------------------------------------------------------

  void BuildEdges() {
    if (!ops_usable_) return;
    const int64_t num_edges = graph_.edges_size();
    if (num_edges > limits_.max_edges) {
      edges_.Add("graph.edges",
                 absl::StrCat(num_edges, " edges exceed the limit of ", limits_.max_edges));
      return;
    }
    const int32_t n = model_.num_ops();
    const std::vector<OpId>& canonical = model_.op_of_request_index;
    model_.request_edge_count = num_edges;
    // An edge as one sortable record: key = (canonical src << id_bits) | canonical dst.
    const int id_bits = BitWidth(n);
    const uint64_t id_mask = (uint64_t{1} << id_bits) - 1;
    std::vector<EdgeRecord> records;
    records.reserve(num_edges);
    // Pass 1, in request order: validate, and record the valid edges.
    for (int64_t i = 0; i < num_edges && !edges_.Full(); ++i) {
      if (i + kPrefetchDistance < num_edges) {
        const v1::Edge& ahead = graph_.edges(static_cast<int>(i + kPrefetchDistance));
        if (ahead.src() >= 0 && ahead.src() < n) __builtin_prefetch(&canonical[ahead.src()]);
        if (ahead.dst() >= 0 && ahead.dst() < n) __builtin_prefetch(&canonical[ahead.dst()]);
      }
      const v1::Edge& edge = graph_.edges(static_cast<int>(i));
      const int32_t src = edge.src();
      const int32_t dst = edge.dst();
      bool in_range = true;
      if (src < 0 || src >= n) {
        edges_.Add(EdgePath(i, "src"),
                   absl::StrCat("index ", src, " out of range (graph has ", n, " ops)"));
        in_range = false;
      }
      if (dst < 0 || dst >= n) {
        edges_.Add(EdgePath(i, "dst"),
                   absl::StrCat("index ", dst, " out of range (graph has ", n, " ops)"));
        in_range = false;
      }
      if (in_range && src == dst) {
        edges_.Add(EdgePath(i, "dst"),
                   absl::StrCat("self-loop: src and dst are both graph.ops[", src, "] (op ",
                                Quote(graph_.ops(src).name()), ")"));
        in_range = false;
      }
      const int64_t bytes = edge.bytes();
      if (bytes < 0 || bytes > limits_.max_bytes) {
        edges_.Add(EdgePath(i, "bytes"), CheckAmount(bytes, limits_.max_bytes, "bytes"));
      }
      if (in_range) {
        records.push_back({(static_cast<uint64_t>(canonical[src]) << id_bits) |
                               static_cast<uint64_t>(canonical[dst]),
                           bytes});
        total_edge_bytes_ += bytes;
      }
    }
    // Adjacency (and with it the cycle check) needs every edge; a broken edge is already reported.
    if (!edges_.empty()) return;

    // Pass 2: sort by (src, dst); parallel edges become neighbours and are merged into the forward CSR.
    // Sums use unsigned arithmetic: an absurd total is rejected later by CheckTotals and must not be
    // undefined behaviour here.
    std::vector<EdgeRecord> scratch;
    auto key = [](const EdgeRecord& record) { return record.key; };
    RadixSort(records, scratch, 0, 2 * id_bits, key);
    std::vector<EdgeId>& out_offset = model_.out_offset;
    std::vector<OpId>& out_dst = model_.out_dst;
    std::vector<int64_t>& out_bytes = model_.out_bytes;
    out_offset.assign(static_cast<size_t>(n) + 1, 0);
    out_dst.resize(records.size());
    out_bytes.resize(records.size());
    EdgeId merged = 0;
    for (size_t k = 0; k < records.size(); ++k) {
      const EdgeRecord& record = records[k];
      if (k > 0 && record.key == records[k - 1].key) {
        out_bytes[merged - 1] = static_cast<int64_t>(static_cast<uint64_t>(out_bytes[merged - 1]) +
                                                     static_cast<uint64_t>(record.bytes));
        continue;
      }
      out_dst[merged] = static_cast<OpId>(record.key & id_mask);
      out_bytes[merged] = record.bytes;
      ++out_offset[(record.key >> id_bits) + 1];
      ++merged;
    }
    out_dst.resize(merged);
    out_bytes.resize(merged);
    for (int32_t v = 0; v < n; ++v) out_offset[v + 1] += out_offset[v];

    // Pass 3: the reverse CSR. Records keyed (dst << id_bits) | src, produced in (src, dst) order and
    // stably sorted by dst alone, come out in (dst, src) order.
    records.resize(merged);
    for (OpId v = 0; v < n; ++v) {
      for (EdgeId e = out_offset[v]; e < out_offset[v + 1]; ++e) {
        records[e] = {(static_cast<uint64_t>(out_dst[e]) << id_bits) | static_cast<uint64_t>(v),
                      out_bytes[e]};
      }
    }
    RadixSort(records, scratch, id_bits, 2 * id_bits, key);
    scratch = std::vector<EdgeRecord>();
    std::vector<EdgeId>& in_offset = model_.in_offset;
    in_offset.assign(static_cast<size_t>(n) + 1, 0);
    model_.in_src.resize(merged);
    model_.in_bytes.resize(merged);
    for (EdgeId e = 0; e < merged; ++e) {
      model_.in_src[e] = static_cast<OpId>(records[e].key & id_mask);
      model_.in_bytes[e] = records[e].bytes;
      ++in_offset[(records[e].key >> id_bits) + 1];
    }
    for (int32_t v = 0; v < n; ++v) in_offset[v + 1] += in_offset[v];
    records = std::vector<EdgeRecord>();
    BuildTopoOrder();
  }

  // Kahn's algorithm, taking the smallest ready OpId each time: the topological order whose ties go to
  // the smaller id. Ops left over lie on or behind a cycle.
  //
  // Which op comes next depends on the ready set, so the CPU cannot run ahead on its own and every cache
  // miss is paid in full. Each op's pending-input count therefore sits next to its out-list position:
  // the decrement that makes an op ready also brings in where its out-list is, which is prefetched right
  // away, typically long before the op is taken.
  void BuildTopoOrder() {
    const int32_t n = model_.num_ops();
    struct Node {
      EdgeId out_begin;
      int32_t out_degree;
      int32_t pending;  // inputs not yet taken
    };
    std::vector<Node> node(n);
    MinIdSet ready(n);
    for (OpId v = 0; v < n; ++v) {
      node[v] = {model_.out_begin(v), static_cast<int32_t>(model_.out_end(v) - model_.out_begin(v)),
                 static_cast<int32_t>(model_.in_end(v) - model_.in_begin(v))};
      if (node[v].pending == 0) ready.Insert(v);
    }
    std::vector<OpId>& order = model_.topo_order;
    order.clear();
    order.reserve(n);
    while (!ready.empty()) {
      const OpId v = ready.PopMin();
      order.push_back(v);
      const OpId* out = model_.out_dst.data() + node[v].out_begin;
      for (int32_t k = 0; k < node[v].out_degree; ++k) {
        Node& w = node[out[k]];
        if (--w.pending == 0) {
          ready.Insert(out[k]);
          __builtin_prefetch(model_.out_dst.data() + w.out_begin);
        }
      }
    }
    if (static_cast<int32_t>(order.size()) < n) {
      std::vector<int32_t> pending(n);
      for (OpId v = 0; v < n; ++v) pending[v] = node[v].pending;
      node = std::vector<Node>();
      ReportCycle(pending);
    }
  }

  // Every op left with pending > 0 has an unprocessed predecessor, so walking backwards through such
  // predecessors must revisit an op: the walk from there on is a cycle. Reported from its smallest op.
  void ReportCycle(const std::vector<int32_t>& pending) {
    const int32_t n = model_.num_ops();
    std::vector<int32_t> visited_at(n, -1);
    std::vector<OpId> walk;
    OpId v = 0;
    while (pending[v] == 0) ++v;
    while (visited_at[v] < 0) {
      visited_at[v] = static_cast<int32_t>(walk.size());
      walk.push_back(v);
      OpId next = kNone;
      for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
        if (pending[model_.in_src[e]] > 0) {
          next = model_.in_src[e];
          break;
        }
      }
      v = next;
    }
    // walk[visited_at[v]..] follows edges backwards; reverse it into the direction of the edges.
    std::vector<OpId> cycle(walk.begin() + visited_at[v], walk.end());
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    // Names come from the request: op_name is incomplete when the op scan stopped early.
    auto name_of = [this](OpId v) { return Quote(graph_.ops(model_.request_index[v]).name()); };
    const OpId first = cycle.front();
    std::string path;
    const size_t shown = std::min<size_t>(cycle.size(), 8);
    for (size_t k = 0; k < shown; ++k) absl::StrAppend(&path, name_of(cycle[k]), " -> ");
    absl::StrAppend(&path, shown < cycle.size() ? "... -> " : "", name_of(first));
    edges_.Add("graph.edges", absl::StrCat("cycle through op ", name_of(first), " (graph.ops[",
                                           model_.request_index[first], "]): ", path));
    model_.topo_order.clear();
  }

  // ---- Colocation groups ------------------------------------------------------------------------

  void BuildGroups() {
    if (!ops_usable_) return;
    const int32_t n = model_.num_ops();
    std::vector<std::pair<absl::string_view, OpId>> grouped;
    for (int32_t r = 0; r < n; ++r) {
      const std::string& group = graph_.ops(r).colocation_group();
      if (!group.empty()) grouped.push_back({group, model_.op_of_request_index[r]});
    }
    std::sort(grouped.begin(), grouped.end());
    model_.group_offset.assign(1, 0);
    model_.group_member.resize(grouped.size());
    for (size_t k = 0; k < grouped.size(); ++k) {
      if (k == 0 || grouped[k].first != grouped[k - 1].first) {
        if (k > 0) model_.group_offset.push_back(static_cast<int32_t>(k));
        model_.group_name.emplace_back(grouped[k].first);
      }
      model_.group_member[k] = grouped[k].second;
      model_.colocation_group[grouped[k].second] = model_.num_groups() - 1;
    }
    if (!grouped.empty()) model_.group_offset.push_back(static_cast<int32_t>(grouped.size()));
    // Pins and kinds of the members are only known when the op scan ran to the end.
    if (!ops_scanned_ || !devices_usable_) return;
    for (int32_t g = 0; g < model_.num_groups() && !ops_.Full(); ++g) CheckGroup(g);
  }

  // A group needs one device that every member may use: all pins equal, and that device's kind (or, when
  // nobody is pinned, some kind) allowed by every member. Members whose own pin / kinds are already
  // reported are skipped so that one mistake yields one violation.
  void CheckGroup(int32_t g) {
    OpId pinned_member = kNone;
    OpId restricted_member = kNone;
    uint64_t mask = 0;  // 0 = no restriction yet
    for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
      const OpId v = model_.group_member[k];
      if (constraint_error_[v]) return;
    }
    for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
      const OpId v = model_.group_member[k];
      const DeviceId pin = model_.pinned_device[v];
      const int32_t r = model_.request_index[v];
      if (pin != kNone) {
        if (pinned_member == kNone) {
          pinned_member = v;
        } else if (model_.pinned_device[pinned_member] != pin) {
          ops_.Add(OpPath(r, "pinned_device"),
                   absl::StrCat("colocation group ", Quote(model_.group_name[g]), ": op ",
                                Quote(model_.op_name[v]), " is pinned to ",
                                Quote(model_.device_name[pin]), " but op ",
                                Quote(model_.op_name[pinned_member]), " (graph.ops[",
                                model_.request_index[pinned_member], "]) is pinned to ",
                                Quote(model_.device_name[model_.pinned_device[pinned_member]])));
          return;
        }
      }
      const uint64_t own = model_.allowed_kind_mask[v];
      if (own != 0) {
        if (restricted_member != kNone && (mask & own) == 0) {
          ops_.Add(OpPath(r, "colocation_group"),
                   absl::StrCat("colocation group ", Quote(model_.group_name[g]),
                                ": no device kind is allowed by both op ", Quote(model_.op_name[v]),
                                " and op ", Quote(model_.op_name[restricted_member]),
                                " (graph.ops[", model_.request_index[restricted_member], "])"));
          return;
        }
        mask = restricted_member == kNone ? own : (mask & own);
        if (restricted_member == kNone) restricted_member = v;
      }
    }
    if (pinned_member == kNone || mask == 0) return;
    const DeviceId pin = model_.pinned_device[pinned_member];
    if (((mask >> model_.device_kind[pin]) & 1) != 0) return;
    // Some member's kinds exclude the pinned device; name the first such member.
    for (int32_t k = model_.group_offset[g]; k < model_.group_offset[g + 1]; ++k) {
      const OpId v = model_.group_member[k];
      const uint64_t own = model_.allowed_kind_mask[v];
      if (own == 0 || ((own >> model_.device_kind[pin]) & 1) != 0) continue;
      ops_.Add(OpPath(model_.request_index[v], "colocation_group"),
               absl::StrCat("colocation group ", Quote(model_.group_name[g]), ": op ",
                            Quote(model_.op_name[pinned_member]), " (graph.ops[",
                            model_.request_index[pinned_member], "]) is pinned to ",
                            Quote(model_.device_name[pin]), " of kind ",
                            Quote(model_.kind_name[model_.device_kind[pin]]), ", which op ",
                            Quote(model_.op_name[v]), " does not allow"));
      return;
    }
  }

  // ---- Training plan (api.md §2.1) --------------------------------------------------------------

  // The plan's numbers, and with a fixed D the ops' pins and kinds against replica group 0.
  void CheckPlan() {
    if (options_message_ == nullptr) return;
    const v1::PlacementOptions& options = *options_message_;
    TrainingPlan& plan = model_.plan;
    bool plan_usable = true;
    const int32_t microbatches = options.microbatches();
    if (microbatches < 0) {
      options_.Add("options.microbatches", absl::StrCat("must be >= 0 (got ", microbatches, ")"));
      plan_usable = false;
    } else if (microbatches > limits_.max_microbatches) {
      options_.Add("options.microbatches", absl::StrCat(microbatches, " exceeds the limit of ",
                                                        limits_.max_microbatches, " microbatches"));
      plan_usable = false;
    } else {
      plan.microbatches = std::max(microbatches, 1);
    }
    const int32_t window = options.max_in_flight();
    if (window < 0) {
      options_.Add("options.max_in_flight", absl::StrCat("must be >= 0 (got ", window, ")"));
    } else if (plan_usable && window > plan.microbatches) {
      options_.Add("options.max_in_flight",
                   absl::StrCat(window, " exceeds microbatches ", plan.microbatches));
    } else {
      plan.max_in_flight = window;
    }
    // Unset = 1 (api.md's default); an explicit 0 asks the solver to choose.
    const int32_t replicas = options.has_data_parallel() ? options.data_parallel() : 1;
    if (replicas < 0) {
      options_.Add("options.data_parallel", absl::StrCat("must be >= 0 (got ", replicas, ")"));
    } else {
      plan.data_parallel = replicas;
      if (devices_usable_ && replicas > 0 && model_.num_devices() % replicas != 0) {
        options_.Add("options.data_parallel", absl::StrCat(replicas, " does not divide ",
                                                           model_.num_devices(), " devices"));
      }
    }
    if (plan_usable && ops_usable_ &&
        static_cast<int64_t>(plan.microbatches) * model_.num_ops() > limits_.max_unrolled_ops) {
      options_.Add("options.microbatches",
                   absl::StrCat(plan.microbatches, " microbatches x ", model_.num_ops(), " ops = ",
                                static_cast<int64_t>(plan.microbatches) * model_.num_ops(),
                                " unrolled ops exceed the limit of ", limits_.max_unrolled_ops));
    }
    if (!options_.empty() || !devices_usable_ || !ops_scanned_ || plan.data_parallel <= 1) return;
    // Replica g runs group 0's assignment on group g, so every op must be placeable inside group 0.
    const int32_t group_size = model_.num_devices() / plan.data_parallel;
    uint64_t group_kinds = 0;
    for (DeviceId d = 0; d < group_size; ++d) group_kinds |= uint64_t{1} << model_.device_kind[d];
    for (OpId c = 0; c < model_.num_ops() && !ops_.Full(); ++c) {
      if (constraint_error_[c]) continue;
      const int32_t r = model_.request_index[c];
      const DeviceId pin = model_.pinned_device[c];
      if (pin != kNone && pin >= group_size) {
        ops_.Add(OpPath(r, "pinned_device"),
                 absl::StrCat("pinned to ", Quote(model_.device_name[pin]),
                              ", outside replica group 0 (the first ", group_size, " of ",
                              model_.num_devices(), " devices with options.data_parallel ",
                              plan.data_parallel, ")"));
      } else if (model_.allowed_kind_mask[c] != 0 &&
                 (model_.allowed_kind_mask[c] & group_kinds) == 0) {
        ops_.Add(OpPath(r, "allowed_kinds"),
                 absl::StrCat("no device of replica group 0 (the first ", group_size, " of ",
                              model_.num_devices(), " devices with options.data_parallel ",
                              plan.data_parallel, ") has any of the allowed kinds"));
      }
    }
  }

  // ---- Re-placement -------------------------------------------------------------------------------

  // The move weight, and every key of the previous placement against the graph's op names (op ids are
  // name order, so a binary search finds them). A device name not in the cluster is a device that left:
  // listed in options.departed_devices when the caller gives that list (then a name in neither is a
  // misspelling), else taken as departed as long as some device of the previous placement is still in
  // the cluster (none at all means the names do not match). Keys are checked in byte order, so the
  // violations do not depend on the map's order.
  void CheckPreviousPlacement() {
    if (options_message_ == nullptr) return;
    const v1::PlacementOptions& options = *options_message_;
    const double weight = options.move_weight_ns_per_byte();
    if (!std::isfinite(weight) || weight < 0.0) {
      options_.Add("options.move_weight_ns_per_byte",
                   absl::StrFormat("must be finite and >= 0 (got %g)", weight));
    } else {
      model_.move_weight_ns_per_byte = weight == 0.0 ? 0.0 : weight;  // -0.0 hashes as 0
    }
    const auto& previous = options.previous_placement();
    const auto& departed_list = options.departed_devices();
    if (previous.empty()) {
      if (!departed_list.empty()) {
        options_.Add("options.departed_devices", "given without options.previous_placement");
      }
      return;
    }
    // The departed devices the caller named (checked against the cluster once it is usable).
    absl::flat_hash_set<absl::string_view> departed;
    for (int i = 0; i < departed_list.size(); ++i) {
      const std::string& name = departed_list[i];
      const std::string field = absl::StrCat("options.departed_devices[", i, "]");
      if (name.empty()) {
        options_.Add(field, "empty device name");
      } else if (!departed.insert(name).second) {
        options_.Add(field, absl::StrCat("device ", Quote(name), " is listed twice"));
      } else if (devices_usable_ && device_by_name_.contains(name)) {
        options_.Add(field, absl::StrCat("device ", Quote(name),
                                         " is in cluster.devices: a device that left is not in the cluster"));
      }
    }
    const bool strict = !departed_list.empty();
    std::vector<std::pair<absl::string_view, absl::string_view>> entries;
    entries.reserve(previous.size());
    for (const auto& [op, device] : previous) entries.emplace_back(op, device);
    std::sort(entries.begin(), entries.end());
    const bool resolvable = ops_usable_ && devices_usable_;
    if (resolvable) model_.previous_device.assign(model_.num_ops(), kNone);
    bool any_in_cluster = false;
    absl::string_view first_absent;
    for (const auto& [op, device] : entries) {
      if (previous_.Full()) break;
      if (!ops_usable_) break;
      const auto field = [op = op] { return absl::StrCat("options.previous_placement[", Quote(op), "]"); };
      const auto it = std::lower_bound(model_.op_name.begin(), model_.op_name.end(), op,
                                       [](const std::string& a, absl::string_view b) {
                                         return absl::string_view(a) < b;
                                       });
      if (it == model_.op_name.end() || absl::string_view(*it) != op) {
        previous_.Add(field(), absl::StrCat("no op named ", Quote(op)));
        continue;
      }
      if (device.empty()) {
        previous_.Add(field(), "empty device name");
        continue;
      }
      if (!devices_usable_) continue;
      const auto found = device_by_name_.find(device);
      if (found != device_by_name_.end()) {
        any_in_cluster = true;
      } else if (strict && !departed.contains(device)) {
        previous_.Add(field(), absl::StrCat("device ", Quote(device),
                                          " is neither in cluster.devices nor in options.departed_devices"));
        continue;
      } else if (first_absent.empty()) {
        first_absent = device;
      }
      if (resolvable) {
        model_.previous_device[it - model_.op_name.begin()] =
            found == device_by_name_.end() ? kDepartedDevice : found->second;
      }
    }
    if (!strict && devices_usable_ && previous_.empty() && !any_in_cluster && !first_absent.empty()) {
      previous_.Add("options.previous_placement",
                    absl::StrCat("none of the devices it names is in cluster.devices (e.g. ",
                                 Quote(first_absent),
                                 "): list the devices that left in options.departed_devices, or send no "
                                 "previous placement for a fresh solve"));
    }
  }

  // A once op below some per-microbatch op closes the step: nothing per-microbatch may follow it (it
  // would wait for every microbatch, and the window would deadlock). Needs the topological order.
  void CheckOncePerStep() {
    if (!model_.has_once_ops) return;
    const int32_t n = model_.num_ops();
    // The nearest per-microbatch op above each op (kNone = none), and below it.
    std::vector<OpId> above(n, kNone), below(n, kNone);
    for (const OpId v : model_.topo_order) {
      for (EdgeId e = model_.in_begin(v); e < model_.in_end(v); ++e) {
        const OpId u = model_.in_src[e];
        const OpId witness = model_.once_per_step[u] ? above[u] : u;
        if (witness != kNone && (above[v] == kNone || witness < above[v])) above[v] = witness;
      }
    }
    for (auto it = model_.topo_order.rbegin(); it != model_.topo_order.rend(); ++it) {
      const OpId u = *it;
      for (EdgeId e = model_.out_begin(u); e < model_.out_end(u); ++e) {
        const OpId v = model_.out_dst[e];
        const OpId witness = model_.once_per_step[v] ? below[v] : v;
        if (witness != kNone && (below[u] == kNone || witness < below[u])) below[u] = witness;
      }
    }
    for (int32_t r = 0; r < n && !ops_.Full(); ++r) {
      const OpId c = model_.op_of_request_index[r];
      if (!model_.once_per_step[c] || above[c] == kNone || below[c] == kNone) continue;
      ops_.Add(OpPath(r, "once_per_step"),
               absl::StrCat("op ", Quote(model_.op_name[c]),
                            " runs once per step after per-microbatch op ", Quote(model_.op_name[above[c]]),
                            " and before per-microbatch op ", Quote(model_.op_name[below[c]]),
                            ": a once op that follows the microbatches must close the step"));
    }
  }

  // ---- Overflow bounds --------------------------------------------------------------------------

  // Run only on an otherwise valid request: rejects inputs whose sums could overflow int64 downstream.
  void CheckTotals() {
    const int32_t n = model_.num_ops();
    __int128 total_bytes = total_edge_bytes_;
    long double total_compute = 0;
    for (OpId v = 0; v < n; ++v) {
      total_bytes += static_cast<__int128>(model_.output_bytes[v]) + model_.persistent_bytes[v] +
                     model_.temp_bytes[v];
      total_compute += static_cast<long double>(model_.compute_ns[v]);
    }
    // Every per-microbatch quantity is held or spent once per microbatch, and each gradient producer
    // adds an accumulation buffer: (M + 1) times the one-microbatch totals bounds the plan's.
    const int64_t copies = static_cast<int64_t>(model_.plan.microbatches) + (model_.has_once_ops ? 1 : 0);
    total_bytes *= copies;
    if (total_bytes > limits_.max_total_bytes) {
      graph_misc_.Add("graph", absl::StrFormat(
                                   "the step's bytes (ops' output, persistent and temp bytes plus "
                                   "edge bytes, per microbatch) add up to %.4Lg, above the limit of %d",
                                   static_cast<long double>(total_bytes), limits_.max_total_bytes));
    }
    const int32_t num_devices = model_.num_devices();
    const double slowest = *std::min_element(model_.speed.begin(), model_.speed.end());
    long double total_time = total_compute / slowest;
    if (num_devices >= 2) {
      int64_t max_latency = 0;
      int64_t min_bandwidth = std::numeric_limits<int64_t>::max();
      for (DeviceId a = 0; a < num_devices; ++a) {
        for (DeviceId b = 0; b < num_devices; ++b) {
          if (a == b) continue;
          max_latency = std::max(max_latency, model_.Link(a, b).latency_ns);
          min_bandwidth = std::min(min_bandwidth, model_.Link(a, b).bandwidth_bytes_per_second);
        }
      }
      total_time += static_cast<long double>(model_.request_edge_count) * (max_latency + 1) +
                    static_cast<long double>(total_edge_bytes_) * 1e9L / min_bandwidth;
      // A ring all-reduce per gradient producer costs at most twice the slowest transfer plus
      // 2(D - 1) latencies: bounded by (2 + 2D) slowest transfers of every edge.
      if (model_.plan.data_parallel > 1 || model_.plan.data_parallel == 0) {
        const int64_t replicas =
            model_.plan.data_parallel == 0 ? num_devices : model_.plan.data_parallel;
        total_time *= 1 + static_cast<long double>(replicas);
      }
    }
    total_time *= static_cast<long double>(model_.plan.microbatches);
    if (total_time > static_cast<long double>(limits_.max_total_time_ns)) {
      graph_misc_.Add("graph", absl::StrFormat(
                                   "the step's work (compute on the slowest device plus the slowest "
                                   "transfer of every edge, per microbatch) adds up to %.4Lg ns, above "
                                   "the limit of %d",
                                   total_time, limits_.max_total_time_ns));
    }
  }

  const v1::Graph& graph_;
  const v1::Cluster& cluster_;
  const double headroom_;
  const v1::PlacementOptions* options_message_;  // null: the plan keeps its defaults
  const ModelLimits& limits_;
  Model model_;

  ViolationList ops_;
  ViolationList edges_;
  ViolationList devices_;
  ViolationList links_;
  ViolationList graph_misc_;
  ViolationList cluster_misc_;
  ViolationList options_;
  ViolationList previous_;  // options.previous_placement entries

  absl::flat_hash_map<absl::string_view, DeviceId> device_by_name_;
  absl::flat_hash_map<absl::string_view, int32_t> kind_by_name_;
  bool devices_usable_ = false;  // device count in range: names, kinds and nodes are resolved
  bool kinds_usable_ = false;    // kind ids fit allowed_kind_mask
  bool ops_usable_ = false;      // op count in range: canonical ids assigned
  bool ops_scanned_ = false;     // every op's pin and kinds resolved
  // Per canonical op: its own pin or kinds are invalid (already reported).
  std::vector<uint8_t> constraint_error_;
  __int128 total_edge_bytes_ = 0;
};

}  // namespace

absl::StatusOr<Model> BuildModel(const v1::Graph& graph, const v1::Cluster& cluster,
                                 double memory_headroom, std::vector<FieldViolation>* violations,
                                 const ModelLimits& limits) {
  return Builder(graph, cluster, memory_headroom, limits).Run(nullptr, violations);
}

absl::StatusOr<Model> BuildModel(const v1::PlaceRequest& request,
                                 std::vector<FieldViolation>* violations,
                                 const ModelLimits& limits) {
  const google::protobuf::Duration* time_limit =
      request.options().has_time_limit() ? &request.options().time_limit() : nullptr;
  return Builder(request.graph(), request.cluster(), request.options().memory_headroom(), limits,
                 &request.options())
      .Run(time_limit, violations);
}

absl::StatusOr<Model> BuildModel(const v1::Graph& graph, const v1::Cluster& cluster,
                                 const v1::PlacementOptions& options,
                                 std::vector<FieldViolation>* violations,
                                 const ModelLimits& limits) {
  return Builder(graph, cluster, options.memory_headroom(), limits, &options)
      .Run(nullptr, violations);
}

std::string FormatViolations(const std::vector<FieldViolation>& violations) {
  std::string out;
  for (const FieldViolation& v : violations) {
    if (!out.empty()) out.push_back('\n');
    absl::StrAppend(&out, v.field, ": ", v.description);
  }
  return out;
}

absl::Status ViolationsError(const std::vector<FieldViolation>& violations) {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(violations.size());
  for (const FieldViolation& v : violations) pairs.emplace_back(v.field, v.description);
  return status_payloads::WithFieldViolations(
      absl::InvalidArgumentError(FormatViolations(violations)), pairs);
}

std::vector<FieldViolation> ViolationsOf(const absl::Status& status) {
  std::vector<FieldViolation> violations;
  for (auto& [field, description] : status_payloads::FieldViolationsOf(status)) {
    violations.push_back({std::move(field), std::move(description)});
  }
  return violations;
}

}  // namespace placement::engine
