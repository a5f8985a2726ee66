// Checkpoint directories (docs/RELIABILITY.md): what is written is what is read back, bit
// for bit; the newest wins; a crash mid-write leaves the previous one; mistakes are named.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "data/dataset.hpp"
#include "training/checkpoint_files.hpp"

using namespace dynapar;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("dynapar_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Every layer's tensors (parameters and optimizer state) as raw bytes, with its layout.
std::vector<std::vector<unsigned char>> raw(const std::vector<model::layer_copy>& layers) {
  std::vector<std::vector<unsigned char>> out;
  for (const auto& l : layers) {
    const auto w = model::to_wire(l);
    std::vector<unsigned char> bytes(w.layout.size() * sizeof(std::int64_t));
    std::memcpy(bytes.data(), w.layout.data(), bytes.size());
    for (const auto& t : w.tensors) {
      model::tensor_meta meta;
      const auto b = model::to_blob(t, meta);
      const auto* p = static_cast<const unsigned char*>(b.data);
      bytes.insert(bytes.end(), p, p + b.size);
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

// Layers after two Adam steps: moments and step counts are in the optimizer state.
std::vector<model::layer_copy> trained(const model::model_chain& m) {
  const auto d = data::synthetic(256, 3);
  model::reference ref(m, {"adam", 1e-3, 0.9, 0});
  ref.step(d, {0, 1, 2, 3, 4, 5, 6, 7});
  ref.step(d, {8, 9, 10, 11, 12, 13, 14, 15});
  return ref.layers();
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

}  // namespace

TEST_CASE("a checkpoint reads back as written: layers with optimizer state, step, controller", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("roundtrip");
  training::checkpoint c;
  c.step = 40;
  c.layers = trained(**m);
  control::controller_snapshot s;
  s.queues.cost = 1.25;
  s.queues.spent = 0.5;
  s.queues.slots = 4;
  s.queues.energy = {{0, 2.5}, {3, 0.25}};
  s.queues.energy_spent = {{0, 10}, {3, 7}};
  s.estimates.speeds = {1.5, 0.75, 0.5};
  s.estimates.tiers[0] = 0.9;
  s.estimates.tiers[2] = 1.1;
  c.controller = s;
  training::checkpoint_writer w(dir.string(), "job_a");
  w.write(c);
  REQUIRE(w.finish());

  auto back = training::load_checkpoint(dir.string(), "job_a", **m);
  REQUIRE(back);
  CHECK(back->step == 40);
  CHECK(raw(back->layers) == raw(c.layers));
  REQUIRE(back->controller);
  const auto& q = back->controller->queues;
  CHECK(q.cost == 1.25);
  CHECK(q.spent == 0.5);
  CHECK(q.slots == 4);
  CHECK(q.energy == s.queues.energy);
  CHECK(q.energy_spent == s.queues.energy_spent);
  CHECK(back->controller->estimates.speeds == s.estimates.speeds);
  CHECK(back->controller->estimates.tiers[0] == 0.9);
  CHECK(back->controller->estimates.tiers[1] == 1.0);
  CHECK(back->controller->estimates.tiers[2] == 1.1);
  fs::remove_all(dir);
}

TEST_CASE("the newest checkpoint wins, and a write cut short leaves it whole", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("newest");
  const auto fresh = [&] {
    std::vector<model::layer_copy> l;
    for (int i = 0; i < model::num_layers(**m); ++i) l.push_back(model::copy_layer(**m, i));
    return l;
  }();
  training::checkpoint_writer w(dir.string(), "job_b");
  training::checkpoint first{10, fresh, std::nullopt};
  training::checkpoint second{20, trained(**m), std::nullopt};
  w.write(first);
  w.write(second);  // waits for the first
  REQUIRE(w.finish());
  CHECK(fs::exists(dir / "step-10" / "layers.pt"));
  // A crash while writing step 30: its temporary directory is there, `latest` is not moved.
  fs::create_directories(dir / ".step-30.tmp");
  write_text(dir / ".step-30.tmp" / "state.json", "{\"job\": \"job_b\", \"st");
  auto back = training::load_checkpoint(dir.string(), "job_b", **m);
  REQUIRE(back);
  CHECK(back->step == 20);
  CHECK(raw(back->layers) == raw(second.layers));
  CHECK_FALSE(back->controller);
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint of another job, model or a damaged one is refused by name", "[unit][training]") {
  auto mlp = model::make_model("mlp", 1);
  auto cnn = model::make_model("cnn", 1);
  REQUIRE(mlp);
  REQUIRE(cnn);
  const auto dir = fresh_dir("refused");
  const auto error_of = [&](const std::string& job, const model::model_chain& m) {
    auto r = training::load_checkpoint(dir.string(), job, m);
    return r ? std::string("loaded") : r.err().code + ": " + r.err().message;
  };
  CHECK_THAT(error_of("job_c", **mlp), Catch::Contains("bad_checkpoint") && Catch::Contains("no 'latest' file"));

  training::checkpoint_writer w(dir.string(), "job_c");
  w.write({5, trained(**mlp), std::nullopt});
  REQUIRE(w.finish());
  REQUIRE(error_of("job_c", **mlp) == "loaded");
  CHECK_THAT(error_of("other", **mlp), Catch::Contains("of job 'job_c', not 'other'"));
  CHECK(error_of("job_c", **cnn) != "loaded");  // the layers do not fit the model

  write_text(dir / "step-5" / "state.json", "{\"job\": \"job_c\", ");
  CHECK_THAT(error_of("job_c", **mlp), Catch::Contains("state.json") && Catch::Contains("is not JSON"));
  write_text(dir / "step-5" / "state.json", R"({"job": "job_c", "step": 5, "controller": {"cost_queue": 1}})");
  CHECK_THAT(error_of("job_c", **mlp), Catch::Contains("bad_checkpoint") && Catch::Contains("state.json"));
  write_text(dir / "latest", "step-99\n");
  CHECK_THAT(error_of("job_c", **mlp), Catch::Contains("step-99") && Catch::Contains("missing"));
  fs::remove_all(dir);
}
