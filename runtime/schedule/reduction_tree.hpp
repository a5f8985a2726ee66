// The order in which a step's micro-batch gradients are added up: a fixed binary tree over the
// global micro-batch index, the same whatever the plan (docs/MODEL.md, "The exact sum").
// Floating-point addition is not associative, so a run equals one device only if both add
// the same numbers in the same grouping; this tree is that grouping. Node (level j, index k)
// covers micro-batches [k 2^j, (k+1) 2^j) cut at the step's count n; a node whose right half
// is empty is its left half, unchanged; any other is left + right.
//
// A holder of some micro-batches keeps only complete nodes and merges two siblings as soon as
// both are there (a binary counter): a contiguous range needs O(log n) buffers, not n, and
// sends them; whoever gathers every holder's nodes evaluates the tree above them. Standard
// library only; the value type and its addition are the caller's (tensors at run time,
// expression strings in the tests).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace dynapar::schedule {

struct tree_node {
  int level = 0;
  std::int64_t index = 0;
  std::int64_t first() const { return index << level; }
  bool operator<(const tree_node& o) const { return level != o.level ? level < o.level : index < o.index; }
};

// One holder's complete nodes. `add(a, b)` returns a + b and may reuse a's storage (a is the
// left operand and is not used again).
template <class T>
class partial_sums {
 public:
  template <class Add>
  void add_leaf(std::int64_t micro, T value, Add&& add) {
    tree_node n{0, micro};
    for (;;) {
      const tree_node sibling{n.level, n.index ^ 1};
      auto it = nodes_.find(sibling);
      if (it == nodes_.end()) break;
      T merged = (n.index & 1) ? add(std::move(it->second), std::move(value)) : add(std::move(value), std::move(it->second));
      nodes_.erase(it);
      value = std::move(merged);
      n = {n.level + 1, n.index >> 1};
    }
    nodes_.emplace(n, std::move(value));
  }
  std::size_t size() const { return nodes_.size(); }
  const std::map<tree_node, T>& nodes() const { return nodes_; }
  std::vector<std::pair<tree_node, T>> take() {
    std::vector<std::pair<tree_node, T>> out(std::make_move_iterator(nodes_.begin()), std::make_move_iterator(nodes_.end()));
    nodes_.clear();
    return out;
  }

 private:
  std::map<tree_node, T> nodes_;
};

// The smallest level whose node 0 covers n micro-batches.
inline int tree_top(std::int64_t n) {
  int j = 0;
  while ((std::int64_t{1} << j) < n) ++j;
  return j;
}

// The sum of micro-batches [0, n) from disjoint complete nodes that cover them (every holder's
// partial_sums together). An error names a missing micro-batch, or a node that overlaps
// another or lies beyond n: a gradient would otherwise be lost or counted twice.
template <class T, class Add>
result<T> evaluate_tree(std::vector<std::pair<tree_node, T>> parts, std::int64_t n, Add&& add) {
  if (n < 1) return make_error("bad_sum", "a sum over " + std::to_string(n) + " micro-batches");
  std::map<tree_node, T> have;
  for (auto& [node, value] : parts) {
    if (node.level < 0 || node.level > 62 || node.index < 0 || node.first() >= n)
      return make_error("bad_sum", "partial sum (level " + std::to_string(node.level) + ", index " + std::to_string(node.index) +
                                       ") lies outside the step's " + std::to_string(n) + " micro-batches");
    if (!have.emplace(node, std::move(value)).second)
      return make_error("bad_sum", "partial sum (level " + std::to_string(node.level) + ", index " + std::to_string(node.index) + ") came twice");
  }
  std::size_t used = 0;
  std::string missing;
  // Recursion depth is the tree's height (<= 63).
  auto value_of = [&](auto&& self, tree_node node) -> T {
    if (auto it = have.find(node); it != have.end()) {
      ++used;
      return std::move(it->second);
    }
    if (node.level == 0) {
      if (missing.empty()) missing = std::to_string(node.index);
      return T{};
    }
    const tree_node left{node.level - 1, node.index * 2}, right{node.level - 1, node.index * 2 + 1};
    T l = self(self, left);
    if (right.first() >= n) return l;
    T r = self(self, right);
    if (!missing.empty()) return T{};
    return add(std::move(l), std::move(r));
  };
  T total = value_of(value_of, tree_node{tree_top(n), 0});
  if (!missing.empty()) return make_error("bad_sum", "micro-batch " + missing + "'s gradient is missing from the sum");
  if (used != have.size()) return make_error("bad_sum", "partial sums overlap: some micro-batches came twice");
  return total;
}

}  // namespace dynapar::schedule
