// Text as next-character prediction: Debian's fortunes corpus (package fortunes) read as
// 7-bit characters, cut into windows whose label is the character after the window. The
// classification shape the runtime trains (one label a sample) is a language model's
// objective at the window's last position.
#pragma once

#include <string>

#include "data/dataset.hpp"

namespace dynapar::data {

inline const char* fortunes_dir = DYNAPAR_FORTUNES_DIR;  // CMake: DYNAPAR_FORTUNES_DIR

struct text_options {
  int window = 32;       // characters a sample
  int stride = 8;        // between the training windows' starts (test windows do not overlap)
  double test_share = 0.1;  // the corpus' last tenth is held out
};

// Every regular file in `dir` without an extension (fortune's .dat and .u8 are its indexes),
// in name order, concatenated. A byte outside 7-bit ASCII becomes 127. split: "train" or
// "test" (disjoint parts of the corpus). The dataset has rows 1, cols `window`, 128 classes
// and tokens set.
result<dataset> load_text(const std::string& dir, const std::string& split, const text_options& o = {});

}  // namespace dynapar::data
