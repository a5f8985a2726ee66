// Data of kind torch (model::load_data): tensors saved with torch.save's format (written here
// by torch::pickle_save, which torch.load reads; tests/own_data/own_data.sh uses Python's own
// torch.save), split and normalised as npy data are, checked value by value by hand.
#include "support/torch_catch.hpp"

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "model/api.hpp"

using namespace dynapar;

namespace {

std::string dir_for(const std::string& name) {
  const std::string dir = "/tmp/dynapar_test_torch_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void save(const std::string& file, const c10::IValue& v) {
  const auto bytes = torch::pickle_save(v);
  std::ofstream(file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

data::source torch_source(const std::string& dir) {
  data::source s;
  s.kind = "torch", s.path = dir, s.val_share = 0.2;
  return s;
}

}  // namespace

TEST_CASE("torch data: (inputs, labels) saved by torch.save's format, split and normalised as npy data", "[unit][data]") {
  const auto dir = dir_for("pair");
  // 5 samples of [2, 1, 3] float64: sample i, element k = i + k / 10; labels 4 - i.
  auto x = torch::arange(30, torch::kFloat64).reshape({5, 2, 1, 3});
  for (int i = 0; i < 5; ++i) x[i] = torch::arange(6, torch::kFloat64).reshape({2, 1, 3}) / 10 + i;
  const auto y = 4 - torch::arange(5, torch::kInt64);
  save(dir + "/train.pt", c10::ivalue::Tuple::create({x, y}));
  auto s = torch_source(dir);
  s.mean = {1, 2}, s.std_dev = {2, 4};
  auto train = model::load_data(s, true);
  REQUIRE(train);
  auto val = model::load_data(s, false);
  REQUIRE(val);
  CHECK((train->size() == 4 && val->size() == 1));
  CHECK((train->channels == 2 && train->rows == 1 && train->cols == 3 && train->classes == 5));
  float got[6];
  train->store->values(3, 0, got);  // sample 3: channel 0 (3 + k/10 - 1) / 2, channel 1 (3 + k/10 - 2) / 4
  CHECK(got[0] == Approx(1.0));
  CHECK(got[2] == Approx(1.1));
  CHECK(got[3] == Approx((3.3 - 2) / 4));
  CHECK(train->store->label(3) == 1);
  CHECK(val->store->label(0) == 0);  // the held-out fifth: sample 4
  CHECK(train->store->samples_read() == 1);
  // A dict with 'inputs' and 'labels' is the same data set.
  c10::Dict<std::string, torch::Tensor> d;
  d.insert("inputs", x);
  d.insert("labels", y);
  save(dir + "/train.pt", d);
  auto from_dict = model::load_data(s, true);
  REQUIRE(from_dict);
  CHECK(data::fingerprint(*from_dict) == data::fingerprint(*train));
  // Regression: float labels [n, 2], read as reals.
  save(dir + "/train.pt", c10::ivalue::Tuple::create({x, torch::arange(10, torch::kFloat32).reshape({5, 2})}));
  CHECK(model::load_data(s, true).err().message.find("labels must be integers (class ids), not float32") != std::string::npos);
  s.regression = true;
  auto reg = model::load_data(s, true);
  REQUIRE(reg);
  CHECK(reg->target_values == 2);
  reg->store->target_values(2, got);
  CHECK((got[0] == 4.0f && got[1] == 5.0f));
}

TEST_CASE("torch data: a file that is not (inputs, labels), a label out of range, a value not finite: named", "[unit][data]") {
  const auto dir = dir_for("bad");
  auto s = torch_source(dir);
  auto message = [&] {
    auto r = model::load_data(s, true);
    return r ? std::string("loaded") : r.err().message;
  };
  CHECK(message().find("train.pt: cannot be read") != std::string::npos);
  std::ofstream(dir + "/train.pt") << "not a zip";
  CHECK(message().find("train.pt: not a file torch.save wrote, or truncated") != std::string::npos);
  save(dir + "/train.pt", torch::zeros({4, 3}));
  CHECK(message().find("must hold (inputs, labels)") != std::string::npos);
  auto x = torch::zeros({4, 3});
  save(dir + "/train.pt", c10::ivalue::Tuple::create({x, torch::tensor({0, 1, 2}, torch::kInt64)}));
  CHECK(message().find("labels must be one per input ([4])") != std::string::npos);
  s.classes = 2;
  save(dir + "/train.pt", c10::ivalue::Tuple::create({x, torch::tensor({0, 1, 2, 1}, torch::kInt64)}));
  CHECK(message().find("train.pt: sample 2 has label 2, outside 0..1") != std::string::npos);
  x[1][2] = std::nan("");
  save(dir + "/train.pt", c10::ivalue::Tuple::create({x, torch::tensor({0, 1, 0, 1}, torch::kInt64)}));
  CHECK(message().find("train.pt: sample 1 holds a value that is not finite") != std::string::npos);
  save(dir + "/train.pt", c10::ivalue::Tuple::create({torch::zeros({4}), torch::tensor({0, 1, 0, 1}, torch::kInt64)}));
  CHECK(message().find("inputs must be [n, channels, rows, cols]") != std::string::npos);
  // Read from the file's mapping as saved: a type the data library does not read, or a
  // strided view, is named with what to save instead.
  const auto y = torch::tensor({0, 1, 0, 1}, torch::kInt64);
  save(dir + "/train.pt", c10::ivalue::Tuple::create({torch::zeros({4, 3}, torch::kFloat16), y}));
  CHECK(message().find("the inputs are Half; kind torch reads uint8, int8, int16, int32, int64, float32 and float64") != std::string::npos);
  save(dir + "/train.pt", c10::ivalue::Tuple::create({torch::zeros({3, 4}).t(), y}));
  CHECK(message().find("the inputs are a strided view; save .contiguous()") != std::string::npos);
  save(dir + "/train.pt", c10::ivalue::Tuple::create({torch::zeros({3, 4}).t().contiguous(), y}));
  CHECK(message() == "loaded");
}
