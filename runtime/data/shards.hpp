// Data sets given as many files (shards), read as one data set in the shards' name order with
// the single file's checks and exactness: a folder of NumPy shards, each with its labels, and
// image shards in WebDataset's layout (tar files).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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

// Image shards (data/source.hpp, kind images, when path/train holds .tar files): WebDataset's
// layout, members KEY.png (or .jpg, .jpeg) and KEY.cls (the class id, decimal) one sample,
// consecutive in the tar; path/val likewise when present, else every round(1 / val_share)-th
// sample is held out. Each tar's headers are read at start and its bytes' digest indexed
// (data/identity.hpp); an image is read by offset, without unpacking, and decoded when a batch
// needs it. Errors name the tar, and the member and sample.
bool holds_tar_shards(const std::string& dir);
result<dataset> load_image_shards(const source& s, bool train);

}  // namespace dynapar::data
