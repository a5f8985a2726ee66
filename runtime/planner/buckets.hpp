#pragma once
// Gradient buckets: the one rule that cuts a run of layers with the same holders into the
// pieces summed in one exchange each. The time model prices these buckets and the runtime's
// holders' sum runs them (actors/reduction.cpp), so the two cannot drift apart.
#include <vector>

namespace dynapar::planner {

struct layer_span {
  int lo = 0, hi = 0;  // layers [lo, hi)
  bool operator==(const layer_span& o) const { return lo == o.lo && hi == o.hi; }
};

// Layers [lo, hi) from the top layer down (backward produces gradients in that order, so the
// top bucket can be summed first): a bucket takes layers until its parameters reach `least`
// bytes, the bottom one keeping what is left. least <= 0: a bucket a layer; infinite: the
// whole run in one. `bytes(a, b)` gives the parameter bytes of layers [a, b) (prefix sums
// make it O(1)). Returns the spans top first.
template <class Bytes>
std::vector<layer_span> bucket_spans(int lo, int hi, double least, const Bytes& bytes) {
  std::vector<layer_span> out;
  for (int top = hi; top > lo;) {
    int bottom = top - 1;
    while (bottom > lo && bytes(bottom, top) < least) --bottom;
    out.push_back({bottom, top});
    top = bottom;
  }
  return out;
}

}  // namespace dynapar::planner
