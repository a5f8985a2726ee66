// Data of kind torch (docs/FORMATS.md, "Data"): tensors a user saved with torch.save. LibTorch
// reads the file's pickle (PyTorchStreamReader and the Unpickler, as torch::pickle_load does),
// but each tensor's storage is handed to it as a view into the file's mapping instead of a
// copy; the tensors then only say where their elements lie, and the data library reads them
// from there as it reads .npy arrays (data::arrays_dataset: the same checks, one sample at a
// time, nothing held whole). Here, not in the data library, because only LibTorch reads the
// pickle; model::load_data sends every other kind there.
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "data/files.hpp"
#include "model/api.hpp"

namespace dynapar::model {
namespace {

// Where each record's bytes may lie in the file: from its start to the next record's (or the
// end), sorted by start.
using extents = std::vector<std::pair<std::size_t, std::size_t>>;

// The pickle's value, its tensors' storages pointing into `f` (never written: the data
// library only reads them), and the records' extents.
c10::IValue unpickle_mapped(const data::mapped_file& f, extents& records) {
  caffe2::serialize::PyTorchStreamReader reader(f.path());
  for (const auto& name : reader.getAllRecords()) records.push_back({reader.getRecordOffset(name), f.size()});
  std::sort(records.begin(), records.end());
  for (std::size_t i = 0; i + 1 < records.size(); ++i) records[i].second = records[i + 1].first;
  auto [pkl, pkl_size] = reader.getRecord("data.pkl");
  const auto* p = static_cast<const char*>(pkl.get());
  std::size_t at = 0;
  auto read = [&](char* out, std::size_t n) {
    n = std::min(n, pkl_size - at);
    std::memcpy(out, p + at, n);
    at += n;
    return n;
  };
  // A storage the pickle says is longer than its record is refused (as_array) before anything
  // reads it.
  auto record = [&](const std::string& key) {
    const std::size_t offset = reader.getRecordOffset("data/" + key);
    if (offset > f.size()) throw std::runtime_error("storage " + key + " lies past the end of the file");
    return at::DataPtr(const_cast<std::uint8_t*>(f.bytes()) + offset, at::kCPU);
  };
  torch::jit::Unpickler u(read, nullptr, nullptr, record, c10::nullopt);
  u.set_version(reader.version());
  return u.parse_ivalue();
}

// The pair a file holds: (inputs, labels) as a tuple or a list, or {"inputs", "labels"}.
result<std::pair<torch::Tensor, torch::Tensor>> pair_of(const c10::IValue& v, const std::string& file) {
  const auto want = make_error("bad_data", file + ": must hold (inputs, labels), two tensors as a tuple or a list, or a dict with 'inputs' and 'labels'");
  std::vector<c10::IValue> two;
  if (v.isTuple()) two = v.toTupleRef().elements().vec();
  else if (v.isList()) two = v.toListRef().vec();
  else if (v.isGenericDict()) {
    const auto d = v.toGenericDict();
    for (const char* k : {"inputs", "labels"}) {
      const auto it = d.find(c10::IValue(std::string(k)));
      if (it == d.end()) return want;
      two.push_back(it->value());
    }
  }
  if (two.size() != 2 || !two[0].isTensor() || !two[1].isTensor()) return want;
  return std::pair{two[0].toTensor(), two[1].toTensor()};
}

// A tensor viewing `f` as the data library's array: its type, shape and where its elements
// start; it must be dense (C order) and lie inside the file.
result<data::npy_array> as_array(const torch::Tensor& t, const std::shared_ptr<const data::mapped_file>& f, const extents& records,
                                  const std::string& what) {
  static const std::pair<torch::ScalarType, data::dtype> torch_dtypes[] = {
      {torch::kUInt8, data::dtype::u8},   {torch::kInt8, data::dtype::i8},   {torch::kInt16, data::dtype::i16}, {torch::kInt32, data::dtype::i32},
      {torch::kInt64, data::dtype::i64}, {torch::kFloat32, data::dtype::f32}, {torch::kFloat64, data::dtype::f64}};
  const auto* type = std::find_if(std::begin(torch_dtypes), std::end(torch_dtypes), [&](const auto& e) { return e.first == t.scalar_type(); });
  if (type == std::end(torch_dtypes))
    return make_error("bad_data", f->path() + ": " + what + " are " + c10::toString(t.scalar_type()) +
                                      "; kind torch reads uint8, int8, int16, int32, int64, float32 and float64 (save .float() or .long())");
  if (t.numel() == 0) return make_error("bad_data", f->path() + ": " + what + " are empty");
  if (!t.is_contiguous()) return make_error("bad_data", f->path() + ": " + what + " are a strided view; save .contiguous()");
  const auto damaged = make_error("bad_data", f->path() + ": " + what + " reach past their record in the file (a damaged file?)");
  const auto* begin = static_cast<const std::uint8_t*>(t.data_ptr());
  if (begin < f->bytes() || begin >= f->bytes() + f->size()) return damaged;
  const auto nbytes = static_cast<std::size_t>(t.numel()) * t.element_size();
  const auto at = static_cast<std::size_t>(begin - f->bytes());
  const auto in = std::upper_bound(records.begin(), records.end(), std::pair{at, SIZE_MAX});
  if (in == records.begin() || at + nbytes > std::prev(in)->second) return damaged;
  data::npy_array a;
  a.file = f;
  a.type = type->second;
  a.shape = t.sizes().vec();
  a.data_offset = at;
  return a;
}

result<data::dataset> load_torch(const data::source& s, bool train) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool own = !train && fs::exists(s.path + "/val.pt", ec);
  const std::string file = s.path + (own ? "/val.pt" : "/train.pt");
  auto f = data::mapped_file::open(file);
  if (!f) return make_error("bad_data", file + ": cannot be read (" + f.err().message + ")");
  c10::IValue v;
  extents records;
  try {
    v = unpickle_mapped(**f, records);
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    return make_error("bad_data", file + ": not a file torch.save wrote, or truncated (" + why.substr(0, 200) + ")");
  }
  auto pair = pair_of(v, file);
  if (!pair) return pair.err();
  auto x = as_array(pair->first, *f, records, "the inputs");
  if (!x) return x.err();
  auto y = as_array(pair->second, *f, records, "the labels");
  if (!y) return y.err();
  return data::arrays_dataset(std::move(*x), std::move(*y), file, file, own, train, s);
}

}  // namespace

result<data::dataset> load_data(const data::source& s, bool train) {
  if (s.kind != "torch") return data::load(s, train);
  if (auto st = data::check(s); !st) return st.err();
  return load_torch(s, train);
}

}  // namespace dynapar::model
