#include "service/engine/baselines/free_slots.h"

#include <algorithm>
#include <limits>

namespace placement::engine::baselines {

FreeSlots::FreeSlots() { Insert(0, std::numeric_limits<int64_t>::max()); }

void FreeSlots::Update(int32_t n) {
  Node& node = nodes_[n];
  node.max_length = std::max({node.until - node.from, MaxLength(node.left), MaxLength(node.right)});
}

void FreeSlots::Split(int32_t n, int64_t key, int32_t& less, int32_t& rest) {
  if (n == -1) {
    less = rest = -1;
    return;
  }
  if (nodes_[n].from < key) {
    Split(nodes_[n].right, key, nodes_[n].right, rest);
    less = n;
  } else {
    Split(nodes_[n].left, key, less, nodes_[n].left);
    rest = n;
  }
  Update(n);
}

int32_t FreeSlots::Merge(int32_t a, int32_t b) {
  if (a == -1) return b;
  if (b == -1) return a;
  if (nodes_[a].priority > nodes_[b].priority) {
    nodes_[a].right = Merge(nodes_[a].right, b);
    Update(a);
    return a;
  }
  nodes_[b].left = Merge(a, nodes_[b].left);
  Update(b);
  return b;
}

int32_t FreeSlots::NewNode(int64_t from, int64_t until) {
  // xorshift32: a fixed sequence, so the tree shape (and nothing observable) is deterministic.
  random_state_ ^= random_state_ << 13;
  random_state_ ^= random_state_ >> 17;
  random_state_ ^= random_state_ << 5;
  const Node node{from, until, until - from, random_state_, -1, -1};
  if (!free_nodes_.empty()) {
    const int32_t n = free_nodes_.back();
    free_nodes_.pop_back();
    nodes_[n] = node;
    return n;
  }
  nodes_.push_back(node);
  return static_cast<int32_t>(nodes_.size()) - 1;
}

void FreeSlots::Insert(int64_t from, int64_t until) {
  int32_t less, rest;
  Split(root_, from, less, rest);
  root_ = Merge(Merge(less, NewNode(from, until)), rest);
  ++size_;
}

void FreeSlots::Erase(int64_t from) {
  int32_t less, rest, middle, greater;
  Split(root_, from, less, rest);
  Split(rest, from + 1, middle, greater);
  if (middle != -1) {
    free_nodes_.push_back(middle);
    --size_;
  }
  root_ = Merge(less, greater);
}

int32_t FreeSlots::Floor(int64_t t) const {
  int32_t n = root_;
  int32_t found = -1;
  while (n != -1) {
    if (nodes_[n].from <= t) {
      found = n;
      n = nodes_[n].right;
    } else {
      n = nodes_[n].left;
    }
  }
  return found;
}

int32_t FreeSlots::FirstAny(int32_t n, int64_t w) const {
  while (n != -1 && nodes_[n].max_length >= w) {
    if (MaxLength(nodes_[n].left) >= w) {
      n = nodes_[n].left;
    } else if (Length(n) >= w) {
      return n;
    } else {
      n = nodes_[n].right;
    }
  }
  return -1;
}

int32_t FreeSlots::FirstAfter(int32_t n, int64_t t, int64_t w) const {
  if (n == -1 || nodes_[n].max_length < w) return -1;
  if (nodes_[n].from <= t) return FirstAfter(nodes_[n].right, t, w);
  const int32_t in_left = FirstAfter(nodes_[n].left, t, w);
  if (in_left != -1) return in_left;
  if (Length(n) >= w) return n;
  return FirstAny(nodes_[n].right, w);
}

int64_t FreeSlots::EarliestStart(int64_t t, int64_t w) const {
  const int32_t floor = Floor(t);
  if (floor != -1) {
    const Node& node = nodes_[floor];
    if (t < node.until && node.until - t >= w) return t;
  }
  // Idle periods never have zero length, so a zero-length run fits at the start of the next one.
  const int32_t next = FirstAfter(root_, t, std::max<int64_t>(w, 1));
  return next == -1 ? std::numeric_limits<int64_t>::max() : nodes_[next].from;
}

void FreeSlots::Occupy(int64_t start, int64_t w) {
  if (w <= 0) return;
  const int32_t n = Floor(start);
  if (n == -1) return;  // precondition broken: nothing idle there
  const int64_t from = nodes_[n].from;
  const int64_t until = nodes_[n].until;
  Erase(from);
  if (start > from) Insert(from, start);
  if (start + w < until) Insert(start + w, until);
}

}  // namespace placement::engine::baselines
