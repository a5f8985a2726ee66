// Which data set a job trains on, as a value that travels: a node process loads the same set
// itself (docs/DISTRIBUTED.md, "Inputs"), so that a step's inputs need only sample ids on the
// wire. A fingerprint tells whether two processes hold the same bytes.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.hpp"

namespace dynapar::data {

struct source {
  std::string kind = "fashion_mnist";  // or "synthetic", "fortunes" (config::job_file::data)
  int synthetic_samples = 0;           // synthetic: the training set's size (the test set: a sixth, at least 1000)
  std::uint64_t seed = 1;              // synthetic: the job's seed
};

// The training (train = true) or test split; an error names a kind it does not know.
result<dataset> load(const source& s, bool train);

// FNV-1a over the shape and every byte: equal sets give equal values, and one changed pixel
// or label another (with overwhelming likelihood). Never 0, which means "no data".
std::uint64_t fingerprint(const dataset& d);

}  // namespace dynapar::data
