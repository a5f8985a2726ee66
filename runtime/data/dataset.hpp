// An in-memory classification set: Fashion-MNIST from its Debian package, seeded synthetic
// data of the same shape for benchmarks, or text windows (data/text.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::data {

struct dataset {
  int rows = 28, cols = 28, classes = 10;
  std::vector<std::uint8_t> images;  // n * rows * cols
  std::vector<std::uint8_t> labels;  // n
  bool tokens = false;  // images are token ids, not pixels: a model takes them as they are
  int size() const { return static_cast<int>(labels.size()); }
};

// Where Debian's dataset-fashion-mnist puts it; a build for another prefix (tools/gpu/build.sh)
// sets DYNAPAR_DATASET_DIR.
#ifndef DYNAPAR_DATASET_DIR
#define DYNAPAR_DATASET_DIR "/usr/share/datasets/fashion-mnist"
#endif
inline const char* fashion_mnist_dir = DYNAPAR_DATASET_DIR;

// split: "train" (60 000) or "t10k" (10 000).
result<dataset> load_fashion_mnist(const std::string& dir, const std::string& split);

// n samples: each class a fixed random pattern plus noise, so that a model can learn it.
dataset synthetic(int n, std::uint64_t seed);

}  // namespace dynapar::data
