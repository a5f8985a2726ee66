// Checkpoint directories (docs/RELIABILITY.md): what is written is what is read back, bit
// for bit; the newest complete one wins; a crash mid-write, a torn file or a full disk leaves
// the previous one; a changed job and other mistakes are named.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include "comm/keys.hpp"
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

std::string read_text(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

training::checkpoint_options options(const fs::path& dir, const std::string& job, int keep = 0) {
  return {dir.string(), job, nlohmann::json{{"batch", 64}, {"optimizer.lr", 0.002}}, keep};
}

// f() as on a full disk: no file may grow past `bytes` (RLIMIT_FSIZE, as `ulimit -f`; a write
// past it fails with EFBIG, SIGXFSZ ignored). The limit and the signal are restored after.
template <class F>
auto on_a_full_disk(rlim_t bytes, F f) {
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = bytes;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  auto out = f();
  REQUIRE(setrlimit(RLIMIT_FSIZE, &before) == 0);
  std::signal(SIGXFSZ, old_handler);
  return out;
}

training::checkpoint gathered(std::int64_t step, std::vector<model::layer_copy> layers) {
  training::checkpoint c;
  c.step = step;
  c.layers = std::move(layers);
  return c;
}

void put(training::checkpoint_writer& w, std::int64_t step, std::vector<model::layer_copy> layers) {
  auto c = gathered(step, std::move(layers));
  REQUIRE(w.write(c));
}

result<training::found_checkpoint> load(const fs::path& dir, const std::string& job, const model::model_chain& m) {
  return training::load_checkpoint(dir.string(), job, options(dir, job).fingerprint, m);
}

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
  training::checkpoint_writer w(options(dir, "job_a"));
  REQUIRE(w.write(c));
  REQUIRE(w.finish().empty());

  auto found = load(dir, "job_a", **m);
  REQUIRE(found);
  CHECK(found->passed_over.empty());
  const auto* back = &found->at;
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
  training::checkpoint_writer w(options(dir, "job_b"));
  auto first = gathered(10, fresh);
  auto second = gathered(20, trained(**m));
  REQUIRE(w.write(first));
  REQUIRE(w.write(second));  // waits for the first
  REQUIRE(w.finish().empty());
  CHECK(fs::exists(dir / "step-10" / "layers.pt"));
  CHECK(read_text(dir / "latest") == "step-20\n");
  // A crash while writing step 30: its temporary directory is there, `latest` is not moved.
  fs::create_directories(dir / ".step-30.tmp");
  write_text(dir / ".step-30.tmp" / "state.json", "{\"job\": \"job_b\", \"st");
  auto back = load(dir, "job_b", **m);
  REQUIRE(back);
  CHECK(back->at.step == 20);
  CHECK(raw(back->at.layers) == raw(second.layers));
  CHECK_FALSE(back->at.controller);
  CHECK(back->passed_over.empty());
  fs::remove_all(dir);
}

TEST_CASE("a torn or changed newest checkpoint is passed over for the one before it", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("torn");
  const auto older = trained(**m);
  training::checkpoint_writer w(options(dir, "job_t"));
  put(w, 10, older);
  put(w, 20, trained(**m));
  REQUIRE(w.finish().empty());
  // state.json cut in half, as a write the disk never finished would leave it.
  const std::string state = read_text(dir / "step-20" / "state.json");
  write_text(dir / "step-20" / "state.json", state.substr(0, state.size() / 2));
  auto back = load(dir, "job_t", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK(raw(back->at.layers) == raw(older));
  REQUIRE(back->passed_over.size() == 1);
  CHECK_THAT(back->passed_over[0], Catch::StartsWith("step-20: ") && Catch::Contains("is not JSON"));
  // One byte of the layers changed: its hash no longer matches, though torch may still load it.
  write_text(dir / "step-20" / "state.json", state);
  REQUIRE(load(dir, "job_t", **m)->at.step == 20);
  {
    std::fstream f(dir / "step-20" / "layers.pt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x5a');
  }
  back = load(dir, "job_t", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  REQUIRE(back->passed_over.size() == 1);
  CHECK_THAT(back->passed_over[0], Catch::Contains("does not match the SHA-256"));
  // Both damaged: the error names each.
  write_text(dir / "step-10" / "state.json", "");
  auto none = load(dir, "job_t", **m);
  REQUIRE_FALSE(none);
  CHECK(none.err().code == "bad_checkpoint");
  CHECK_THAT(none.err().message, Catch::Contains("no complete checkpoint") && Catch::Contains("step-20: ") && Catch::Contains("step-10: "));
  fs::remove_all(dir);
}

TEST_CASE("only the newest K checkpoints are kept", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("keep");
  const auto layers = trained(**m);
  training::checkpoint_writer w(options(dir, "job_k", 2));
  for (std::int64_t step : {4, 8, 12, 16}) put(w, step, layers);
  REQUIRE(w.finish().empty());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"latest", "step-12", "step-16"});
  fs::remove_all(dir);
}

// A full disk, made real with the file-size limit (RLIMIT_FSIZE, as `ulimit -f`): the write
// fails with EFBIG, the writer says so and cleans up, and the previous checkpoint still loads.
TEST_CASE("a checkpoint the disk cannot take leaves the previous one loadable", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("full");
  const auto first = trained(**m);
  training::checkpoint_writer w(options(dir, "job_f"));
  put(w, 10, first);
  REQUIRE(w.finish().empty());
  const auto size = fs::file_size(dir / "step-10" / "layers.pt");
  const auto failed = on_a_full_disk(size / 2, [&] {
    put(w, 20, first);
    return w.finish();
  });
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0], Catch::StartsWith("step-20: ") && Catch::Contains("layers.pt"));
  CHECK_FALSE(fs::exists(dir / "step-20"));
  CHECK_FALSE(fs::exists(dir / ".step-20.tmp"));  // its space given back
  CHECK(read_text(dir / "latest") == "step-10\n");
  auto back = load(dir, "job_f", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK(raw(back->at.layers) == raw(first));
  fs::remove_all(dir);
}

TEST_CASE("a checkpoint of another job, fingerprint, model or a damaged one is refused by name", "[unit][training]") {
  auto mlp = model::make_model("mlp", 1);
  auto cnn = model::make_model("cnn", 1);
  REQUIRE(mlp);
  REQUIRE(cnn);
  const auto dir = fresh_dir("refused");
  const auto error_of = [&](const std::string& job, const model::model_chain& m, nlohmann::json fingerprint) {
    auto r = training::load_checkpoint(dir.string(), job, fingerprint, m);
    return r ? std::string("loaded") : r.err().code + ": " + r.err().message;
  };
  const auto same = options(dir, "job_c").fingerprint;
  CHECK_THAT(error_of("job_c", **mlp, same), Catch::Contains("bad_checkpoint") && Catch::Contains("no checkpoint in"));

  training::checkpoint_writer w(options(dir, "job_c"));
  put(w, 5, trained(**mlp));
  REQUIRE(w.finish().empty());
  REQUIRE(error_of("job_c", **mlp, same) == "loaded");
  CHECK_THAT(error_of("other", **mlp, same), Catch::Contains("bad_resume") && Catch::Contains("of job 'job_c', not 'other'"));
  auto changed = same;
  changed["batch"] = 32;
  CHECK_THAT(error_of("job_c", **mlp, changed), Catch::Contains("bad_resume") && Catch::Contains("with batch: 64; this job has 32"));
  changed = same;
  changed["optimizer.lr"] = 0.001;
  CHECK_THAT(error_of("job_c", **mlp, changed), Catch::Contains("optimizer.lr: 0.002; this job has 0.001"));
  changed = same;
  changed["seed"] = 7;  // a field the checkpoint does not name is not compared
  CHECK(error_of("job_c", **mlp, changed) == "loaded");
  CHECK(error_of("job_c", **cnn, same) != "loaded");  // the layers do not fit the model

  write_text(dir / "step-5" / "state.json", "{\"job\": \"job_c\", ");
  CHECK_THAT(error_of("job_c", **mlp, same), Catch::Contains("state.json") && Catch::Contains("is not JSON"));
  write_text(dir / "step-5" / "state.json", R"({"job": "job_c", "step": 5, "controller": {"cost_queue": 1}})");
  CHECK_THAT(error_of("job_c", **mlp, same), Catch::Contains("bad_checkpoint") && Catch::Contains("state.json"));
  fs::remove_all(dir / "step-5");
  CHECK_THAT(error_of("job_c", **mlp, same), Catch::Contains("no checkpoint in"));
  fs::remove_all(dir);
}

namespace {

// A checkpoint in shards, as the holders write it: each layer saved into the writer's
// temporary directory for the step (model::save_shard), with the file's SHA-256.
training::checkpoint sharded(training::checkpoint_writer& w, std::int64_t step, const std::vector<model::layer_copy>& layers) {
  training::checkpoint c;
  c.step = step;
  const std::string dir = w.shard_dir(step);
  REQUIRE_FALSE(dir.empty());
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string path = dir + "/layer-" + std::to_string(l) + ".pt";
    REQUIRE(model::save_shard(path, static_cast<int>(l), layers[l]));
    c.shards.push_back({path, *comm::file_sha256(path)});
  }
  return c;
}

// The layers a checkpoint's shards hold, read as a device placed on them reads them.
std::vector<model::layer_copy> read_back(const training::checkpoint& c, const model::model_chain& m) {
  std::vector<model::layer_copy> out;
  for (std::size_t l = 0; l < c.shards.size(); ++l) {
    auto w = model::read_shard(c.shards[l].path, static_cast<int>(l));
    REQUIRE(w);
    auto layer = model::from_wire(m, static_cast<int>(l), *w);
    REQUIRE(layer);
    out.push_back(*layer);
  }
  return out;
}

}  // namespace

TEST_CASE("a checkpoint in shards: committed with its manifest, read back bit for bit where it is placed", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("shards");
  const auto layers = trained(**m);
  training::checkpoint_writer w(options(dir, "job_s"));
  auto c = sharded(w, 30, layers);
  REQUIRE(w.write(c));
  // Committed: the shards are where the commit put them, and the cut names them there.
  CHECK_FALSE(fs::exists(dir / ".step-30.tmp"));
  CHECK(read_text(dir / "latest") == "step-30\n");
  REQUIRE(c.shards.size() == layers.size());
  for (std::size_t l = 0; l < c.shards.size(); ++l)
    CHECK(c.shards[l].path == fs::absolute(dir / "step-30" / ("layer-" + std::to_string(l) + ".pt")).string());
  CHECK_FALSE(fs::exists(dir / "step-30" / "layers.pt"));  // nothing gathered
  auto back = load(dir, "job_s", **m);
  REQUIRE(back);
  CHECK(back->at.step == 30);
  CHECK(back->at.layers.empty());
  REQUIRE(back->at.shards.size() == layers.size());
  CHECK(back->at.shards[1].path == c.shards[1].path);
  CHECK(back->at.shards[1].sha256 == c.shards[1].sha256);
  CHECK(raw(read_back(back->at, **m)) == raw(layers));
  // A shard read as another layer's is refused by name.
  auto wrong = model::read_shard(c.shards[0].path, 1);
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.err().message, Catch::Contains("layer 0's shard, not layer 1's"));
  fs::remove_all(dir);
}

TEST_CASE("a shard changed or missing, or a torn manifest, falls back to the checkpoint before", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("shards_torn");
  const auto older = trained(**m);
  std::vector<model::layer_copy> fresh;
  for (int i = 0; i < model::num_layers(**m); ++i) fresh.push_back(model::copy_layer(**m, i));
  training::checkpoint_writer w(options(dir, "job_u"));
  auto first = sharded(w, 10, older);
  REQUIRE(w.write(first));
  auto second = sharded(w, 20, fresh);
  REQUIRE(w.write(second));
  const auto state = read_text(dir / "step-20" / "state.json");
  const auto shard = dir / "step-20" / "layer-1.pt";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    f.put('\x5a');
  }
  auto back = load(dir, "job_u", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK(raw(read_back(back->at, **m)) == raw(older));
  REQUIRE(back->passed_over.size() == 1);
  CHECK_THAT(back->passed_over[0], Catch::StartsWith("step-20: ") && Catch::Contains("layer-1.pt") && Catch::Contains("does not match the SHA-256"));
  fs::remove(shard);
  back = load(dir, "job_u", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK_THAT(back->passed_over.at(0), Catch::Contains("layer-1.pt' is missing"));
  // The manifest torn, as a write the disk never finished would leave it.
  write_text(dir / "step-20" / "state.json", state.substr(0, state.size() / 2));
  back = load(dir, "job_u", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK_THAT(back->passed_over.at(0), Catch::Contains("is not JSON"));
  // A manifest naming a file outside its directory is damage, not a path to follow.
  auto outside = nlohmann::json::parse(state);
  outside["shards"][0]["file"] = "../step-10/layer-0.pt";
  write_text(dir / "step-20" / "state.json", outside.dump());
  back = load(dir, "job_u", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK_THAT(back->passed_over.at(0), Catch::Contains("outside its directory"));
  fs::remove_all(dir);
}

// The shards are on disk; the manifest is what the full disk refuses (RLIMIT_FSIZE below its
// size): the write says so, its directory goes, and the checkpoint before stays the newest.
TEST_CASE("a checkpoint in shards whose manifest the disk cannot take leaves the previous one", "[unit][training]") {
  auto m = model::make_model("mlp", 1);
  REQUIRE(m);
  const auto dir = fresh_dir("shards_full");
  const auto layers = trained(**m);
  training::checkpoint_writer w(options(dir, "job_v"));
  auto first = sharded(w, 10, layers);
  REQUIRE(w.write(first));
  auto second = sharded(w, 20, layers);
  const auto st = on_a_full_disk(64, [&] { return w.write(second); });
  REQUIRE_FALSE(st);
  CHECK_THAT(st.err().message, Catch::Contains("state.json"));
  const auto failed = w.finish();
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0], Catch::StartsWith("step-20: "));
  CHECK_FALSE(fs::exists(dir / "step-20"));
  CHECK_FALSE(fs::exists(dir / ".step-20.tmp"));
  CHECK(read_text(dir / "latest") == "step-10\n");
  auto back = load(dir, "job_v", **m);
  REQUIRE(back);
  CHECK(back->at.step == 10);
  CHECK(raw(read_back(back->at, **m)) == raw(layers));
  fs::remove_all(dir);
}
