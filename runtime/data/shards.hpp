// Data sets given as many files (shards): a folder of NumPy shards, each with its labels, read
// as one data set in the shards' name order, with the single file's checks and exactness.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/source.hpp"

namespace dynapar::data {

// Samples [first, first + count) of several stores read one after another: sample i of the
// whole is sample i - (the sizes before it) of the store that holds it.
std::shared_ptr<const sample_store> concatenated(std::vector<std::shared_ptr<const sample_store>> parts, std::int64_t first, std::int64_t count);

// npy shards (data/source.hpp, kind npy without train_inputs.npy): path/train holds pairs
// STEM_inputs.npy and STEM_labels.npy, read in STEM's name order as one array; path/val, when
// present, the validation split the same way, else the last val_share of the training rows.
// Every shard's samples share one shape; errors name the shard's file and its sample.
result<dataset> load_npy_shards(const source& s, bool train);

}  // namespace dynapar::data
