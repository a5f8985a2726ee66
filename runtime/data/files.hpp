// The user's data files as sample stores (data/dataset.hpp): NumPy arrays and token files,
// mapped and read sample by sample. Each is checked once when opened (labels and ids in
// range, values finite) in a pass that also makes its fingerprint and then lets the pages go.
#pragma once

#include "data/source.hpp"

namespace dynapar::data {

// npy: inputs [n, channels, rows, cols], [n, rows, cols] or [n, features] of any dtype
// data/npy.hpp reads; labels [n] of an integer dtype.
result<dataset> load_npy(const source& s, bool train);
// tokens: a flat array of uint16 or uint32 ids; sample i is the `window` ids from
// i * stride, its label the id after them.
result<dataset> load_tokens(const source& s, bool train);

}  // namespace dynapar::data
