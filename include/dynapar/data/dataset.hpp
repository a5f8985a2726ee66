// A classification set: in memory (Fashion-MNIST from its Debian package, seeded synthetic
// data of the same shape for benchmarks, text windows: data/text.hpp), or read sample by
// sample from the user's files (data/files.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace dynapar::data {

// Samples that stay in their files: each read when a batch needs it.
class sample_store {
 public:
  virtual ~sample_store() = default;
  virtual int size() const = 0;
  // Sample i's channels * rows * cols values, as the model takes them (normalised as the job
  // says; token ids as they are). `step`: the training step that reads it, which seeds its
  // augmentation (the same draws on every device and plan); < 0: evaluation, none. Throws
  // std::runtime_error naming the file when it no longer reads as it did when loaded.
  virtual void values(int i, std::int64_t step, float* out) const = 0;
  virtual std::int64_t label(int i) const = 0;
  // A regression's sample i: its dataset's target_values reals (none by default).
  virtual void target_values(int, float*) const {}
  // Next-token's sample i: the id after each of its positions, target_ids of them.
  virtual void target_ids(int, std::int64_t*) const {}
  // Over the shape and every byte the samples come from (data/source.hpp's fingerprint).
  virtual std::uint64_t fingerprint() const = 0;
  // Samples read so far, by values(): what a test counts to show a node reads only its own.
  virtual std::int64_t samples_read() const = 0;
  // Whether a sample is decoded when read (images): a micro-batch's are then read on up to
  // `decoders` threads (model::inputs), since values() may be called from several at once.
  virtual bool decodes() const { return false; }
  static constexpr int decoders = 4;
  // A hint: `ids` are read next, for training step `step`; a store may decode them meanwhile
  // (data/read_ahead.hpp), which changes no value read. Ignored by default.
  virtual void ahead(const std::vector<int>& ids, std::int64_t step) const {
    (void)ids, (void)step;
  }
  // Of the reads so far: those served from what was decoded ahead, those decoded when read,
  // and the seconds reads spent decoding or waiting for a sample (zeros: no read-ahead).
  struct read_figures {
    std::int64_t ahead = 0, when_read = 0;
    double waited_s = 0;
  };
  virtual read_figures read_ahead_figures() const { return {}; }
};

struct dataset {
  int channels = 1, rows = 28, cols = 28, classes = 10;
  std::vector<std::uint8_t> images;  // n * rows * cols, when in memory (one channel)
  std::vector<std::uint8_t> labels;  // n
  bool tokens = false;  // the values are token ids, not pixels: a model takes them as they are
  int target_values = 0;  // > 0: a regression; each target is that many reals (store->target_values), not a class
  int target_ids = 0;     // > 0: next-token; each target is that many ids (store->target_ids), one a position
  std::shared_ptr<const sample_store> store;  // set: the samples are read from files, not images/labels
  int size() const { return store ? store->size() : static_cast<int>(labels.size()); }
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
