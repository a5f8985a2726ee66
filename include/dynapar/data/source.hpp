// Which data set a job trains on, as a value that travels: a node process loads the same set
// itself (docs/DISTRIBUTED.md, "Inputs"), so that a step's inputs need only sample ids on the
// wire. A fingerprint tells whether two processes hold the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.hpp"

namespace dynapar::data {

struct source {
  std::string kind = "fashion_mnist";  // or "synthetic", "fortunes"; the user's files: "npy", "tokens", "images"
  int synthetic_samples = 0;           // synthetic: the training set's size (the test set: a sixth, at least 1000)
  std::uint64_t seed = 1;              // synthetic: the job's seed
  // npy and tokens (docs/FORMATS.md, "Data"): a folder. npy: train_inputs.npy and
  // train_labels.npy, optionally val_inputs.npy and val_labels.npy; tokens: train.bin,
  // optionally val.bin.
  std::string path;
  double val_share = 0.1;        // without validation files, this last share of the training files is held out
  // npy and images: a value x of channel c is fed as (x - mean[c]) / std_dev[c] (job: mean,
  // std); one value for every channel, or one per channel (npy: the inputs' dimension 1).
  std::vector<double> mean{0.0}, std_dev{1.0};
  int classes = 0;               // npy: labels are below it (0: the largest label + 1)
  // npy: the labels are real values to regress (job: loss mse), [n] or [n, k] of any dtype,
  // not class ids; the model's output has k values a sample.
  bool regression = false;
  // tokens: the target is every position's next id (job: loss next_token), not only the one
  // after the window.
  bool next_token = false;
  std::string token_type = "uint16";  // tokens: the ids' type, uint16 or uint32
  int window = 32;               // tokens: ids a sample; its label is the id after them
  int stride = 0;                // tokens: between the starts of two samples (0: window)
  int vocab = 0;                 // tokens: every id is below it
  // images (torchvision's ImageFolder layout: train/CLASS/FILE, optionally val/CLASS/FILE; PNG
  // or JPEG): decoded, resized to rows x cols with `channels` (1 grey, 3 RGB), scaled to
  // [0, 1], then (x - mean) / std_dev; in training, a seeded crop from the image padded by
  // `crop_pad` pixels and a mirror image half of the time (flip).
  int image_rows = 32, image_cols = 32, image_channels = 3;
  int crop_pad = 0;
  bool flip = false;
  // images: threads that decode the next step's training images while a step runs, when the
  // run hints at them (data/read_ahead.hpp); 0: none.
  int read_ahead = 2;
};

// What channel c's values are fed as: (x - mean_of(s, c)) / std_of(s, c).
inline double mean_of(const source& s, int c) { return s.mean.size() == 1 ? s.mean[0] : s.mean[static_cast<std::size_t>(c)]; }
inline double std_of(const source& s, int c) { return s.std_dev.size() == 1 ? s.std_dev[0] : s.std_dev[static_cast<std::size_t>(c)]; }
// Checks that mean and std each hold one value or one a channel, `channels` of them.
status check_channels(const source& s, int channels, const std::string& where);

// The bounds every source keeps, from a job file or off the network: errors name the job
// file's field (data.vocab, ...).
status check(const source& s);

// The training (train = true) or validation split; an error names a kind it does not know,
// and for the user's files, the file and the sample that is wrong.
result<dataset> load(const source& s, bool train);

// A source as one text (the controller's welcome carries it to nodes), and back; decode takes
// a bare kind too.
std::string encode(const source& s);
result<source> decode(const std::string& text);

// FNV-1a over the shape and every byte: equal sets give equal values, and one changed pixel
// or label another (with overwhelming likelihood). Never 0, which means "no data".
std::uint64_t fingerprint(const dataset& d);
// A job's training and validation sets together: what a node proves it holds before steps
// and evaluations name samples instead of carrying them.
std::uint64_t fingerprint(const dataset& train, const dataset& val);

}  // namespace dynapar::data
