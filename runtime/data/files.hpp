// The user's data files as sample stores (data/dataset.hpp): NumPy arrays and token files,
// mapped and read sample by sample. Each is checked when opened (labels and ids in range,
// values finite) in a pass that also makes its fingerprint and then lets the pages go; the
// pass's digest is indexed (data/identity.hpp), so a later start skips it while the file is
// unchanged. Labels, small, are read whole at every start.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "data/identity.hpp"
#include "data/npy.hpp"
#include "data/source.hpp"

namespace dynapar::data {

// npy: inputs [n, channels, rows, cols], [n, rows, cols] or [n, features] of any dtype
// data/npy.hpp reads; labels [n] of an integer dtype.
result<dataset> load_npy(const source& s, bool train);
// The checks, split and store of an (inputs, labels) pair of mapped arrays, as for npy, wherever
// the arrays lie in their files (model/torch_data.cpp: torch.save's storages); xf and yf name
// the files in errors; own: the validation split has a file of its own. `index`: the data's
// index, which the caller saves (shards: one read and write a load); none: opened and saved here.
result<dataset> arrays_dataset(npy_array x, npy_array y, const std::string& xf, const std::string& yf, bool own, bool train, const source& s,
                               identity_index* index = nullptr);
// The rows [first, first + count) of n that a split takes: the whole of its own file, or the
// training file less (train) or only (validation) its last val_share (at least one row).
std::pair<std::int64_t, std::int64_t> split(std::int64_t n, bool own_file, bool train, double val_share);
// The digest of [lo, hi) of `f`'s bytes, which pass check(first, last) (named by `what`): from
// `index` while the file is as it was then, else read now in chunks, each chunk's pages let go
// after (a pass over a file larger than memory stays small), and put in `index` (the caller
// saves it: one index read and written a start, however many files).
result<std::uint64_t> indexed_pass(const mapped_file& f, std::size_t lo, std::size_t hi, identity_index& index, const std::string& what,
                                   const std::function<status(std::size_t, std::size_t)>& check);
// tokens: a flat array of uint16 or uint32 ids; sample i is the `window` ids from
// i * stride, its label the id after them.
result<dataset> load_tokens(const source& s, bool train);

}  // namespace dynapar::data
