// Adam in one pass against LibTorch's torch::optim::Adam (the independent reference), and
// the property exactness rests on: an element's result does not depend on where the loop
// that updates it starts or ends. (REQUIRE throughout: LibTorch's glog defines CHECK.)
#include "support/torch_catch.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/adam_kernel.hpp"
#include "model/boxes.hpp"
#include "model/fused_adam.hpp"

using namespace dynapar::model;

namespace {

// Odd sizes, so that every vector body has a scalar tail.
std::vector<torch::Tensor> parameters(std::uint64_t seed) {
  torch::manual_seed(seed);
  return {torch::randn({1}), torch::randn({7, 3}), torch::randn({1003}), torch::randn({64, 33})};
}

template <class Optimizer>
std::vector<torch::Tensor> train(torch::optim::AdamOptions o, int steps, std::vector<torch::Tensor> params) {
  for (auto& p : params) p.requires_grad_(true);
  Optimizer opt(params, o);
  torch::manual_seed(99);
  for (int s = 0; s < steps; ++s) {
    for (auto& p : params) p.mutable_grad() = torch::randn_like(p) * (s % 3 + 1);
    opt.step();
  }
  return params;
}

}  // namespace

TEST_CASE("fused Adam follows LibTorch's Adam, with and without weight decay", "[fused_adam]") {
  for (double decay : {0.0, 0.01}) {
    auto o = torch::optim::AdamOptions(3e-3).weight_decay(decay);
    auto start = parameters(1);
    auto theirs = train<torch::optim::Adam>(o, 30, parameters(1));
    auto ours = train<fused_adam>(o, 30, parameters(1));
    for (std::size_t i = 0; i < ours.size(); ++i) {
      INFO("decay " << decay << ", parameter " << i);
      REQUIRE(!torch::equal(ours[i], start[i]));  // it trained
      // LibTorch rounds (1 - beta1) g into m with a fused multiply-add: last bits differ.
      REQUIRE(torch::allclose(ours[i], theirs[i], /*rtol=*/1e-5, /*atol=*/1e-6));
    }
  }
}

TEST_CASE("fused Adam continues LibTorch Adam's state and keeps it where LibTorch does", "[fused_adam]") {
  auto o = torch::optim::AdamOptions(1e-2);
  auto params = parameters(2);
  for (auto& p : params) p.requires_grad_(true);
  torch::optim::Adam theirs(params, o);
  auto mine = parameters(2);
  for (auto& p : mine) p.requires_grad_(true);
  fused_adam ours(mine, o);
  torch::manual_seed(5);
  for (int s = 0; s < 6; ++s) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto g = torch::randn_like(params[i]);
      params[i].mutable_grad() = g;
      mine[i].mutable_grad() = g.clone();
    }
    theirs.step();
    if (s < 3) {  // three steps LibTorch's, then its state moves over as a migration moves it
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params.size(); ++i) {
        mine[i].copy_(params[i]);
        ours.state()[state_key(mine[i])] = copy_state(*theirs.state().at(state_key(params[i])), torch::kCPU);
      }
    } else {
      ours.step();
    }
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& a = static_cast<const torch::optim::AdamParamState&>(*theirs.state().at(state_key(params[i])));
    const auto& b = static_cast<const torch::optim::AdamParamState&>(*ours.state().at(state_key(mine[i])));
    REQUIRE(b.step() == a.step());
    REQUIRE(torch::allclose(b.exp_avg(), a.exp_avg(), 1e-5, 1e-7));
    REQUIRE(torch::allclose(b.exp_avg_sq(), a.exp_avg_sq(), 1e-5, 1e-9));
    REQUIRE(torch::allclose(mine[i], params[i], 1e-5, 1e-6));
  }
}

TEST_CASE("fused Adam hands amsgrad to LibTorch's own step", "[fused_adam]") {
  auto o = torch::optim::AdamOptions(3e-3).amsgrad(true);
  auto theirs = train<torch::optim::Adam>(o, 5, parameters(3));
  auto ours = train<fused_adam>(o, 5, parameters(3));
  for (std::size_t i = 0; i < ours.size(); ++i) REQUIRE(torch::equal(ours[i], theirs[i]));
}

TEST_CASE("Adam's one-pass loop gives each element the same bits however the tensor is cut", "[fused_adam]") {
  const std::int64_t n = 1003;
  torch::manual_seed(4);
  auto p = torch::randn({n}), m = torch::randn({n}) * 0.1, v = torch::rand({n}) * 0.01, g = torch::randn({n});
  for (double decay : {0.0, 0.01}) {
    const auto c = adam_step_coefficients(1e-3, 0.9, 0.999, 1e-8, decay, 7);
    auto whole = std::vector<torch::Tensor>{p.clone(), m.clone(), v.clone()};
    adam_update(whole[0].data_ptr<float>(), whole[1].data_ptr<float>(), whole[2].data_ptr<float>(), g.data_ptr<float>(), n, c);
    for (std::int64_t piece : {1, 3, 37}) {
      auto cut = std::vector<torch::Tensor>{p.clone(), m.clone(), v.clone()};
      for (std::int64_t lo = 0; lo < n; lo += piece) {
        const auto len = std::min(piece, n - lo);
        adam_update(cut[0].data_ptr<float>() + lo, cut[1].data_ptr<float>() + lo, cut[2].data_ptr<float>() + lo, g.data_ptr<float>() + lo,
                    len, c);
      }
      for (int k = 0; k < 3; ++k) {
        INFO("decay " << decay << ", pieces of " << piece << ", array " << k);
        REQUIRE(std::memcmp(cut[k].data_ptr<float>(), whole[k].data_ptr<float>(), n * sizeof(float)) == 0);
      }
    }
    REQUIRE(!torch::equal(whole[0], p));
  }
}

TEST_CASE("step_on_sums divides inside the loop as LibTorch divides before its step, and leaves the sums alone", "[fused_adam]") {
  const double divisor = 3;  // not a power of two: the division rounds
  auto theirs_params = parameters(6), ours_params = parameters(6);
  for (auto& p : theirs_params) p.requires_grad_(true);
  for (auto& p : ours_params) p.requires_grad_(true);
  // Adam is nearly blind to a gradient's scale; weight decay makes the divisor count.
  const auto o = torch::optim::AdamOptions(2e-3).weight_decay(0.05);
  torch::optim::Adam theirs(theirs_params, o);
  auto ours = make_optimizer(ours_params, optimizer_config{"adam", 2e-3, 0, 0.05});
  torch::manual_seed(8);
  for (int s = 0; s < 10; ++s) {
    std::vector<torch::Tensor> sums, kept;
    for (const auto& p : ours_params) sums.push_back(torch::randn_like(p) * 3);
    for (const auto& t : sums) kept.push_back(t.clone());
    {
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < sums.size(); ++i) theirs_params[i].mutable_grad() = sums[i] / divisor;
      theirs.step();
    }
    step_on_sums(*ours, ours_params, sums, divisor);
    for (std::size_t i = 0; i < sums.size(); ++i) {
      INFO("step " << s << ", parameter " << i);
      REQUIRE(torch::equal(sums[i], kept[i]));          // only read: a sum may be shared
      REQUIRE(!ours_params[i].grad().defined());        // and let go of after the step
    }
  }
  for (std::size_t i = 0; i < ours_params.size(); ++i)
    REQUIRE(torch::allclose(ours_params[i], theirs_params[i], /*rtol=*/1e-5, /*atol=*/1e-6));
}

namespace {

// The resident kB of this process's mapping that holds `p` (/proc/self/smaps), -1 if none.
long mapping_rss_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      in = lo <= at && at < hi;
      continue;
    }
    long kb = 0;
    if (in && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/dynapar-offload-XXXXXX";
    path = mkdtemp(name);
  }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

}  // namespace

TEST_CASE("fused Adam with its moments in a file trains the bits it trains in memory, holding none of them", "[fused_adam][offload]") {
  // A parameter of over one slice (4 Mi values) is updated in slices, each let go of after.
  const auto params = [] {
    torch::manual_seed(3);
    return std::vector<torch::Tensor>{torch::randn({7, 3}), torch::randn({(std::int64_t{1} << 22) + 1001}), torch::randn({33})};
  };
  temp_dir dir;
  auto mem = params(), off = params();
  for (auto& p : mem) p.requires_grad_(true);
  for (auto& p : off) p.requires_grad_(true);
  const auto o = torch::optim::AdamOptions(3e-3).weight_decay(0.01);
  fused_adam in_memory(mem, o), in_file(off, o);
  in_file.offload_to(dir.path);
  const auto moments = [](fused_adam& a, const torch::Tensor& p) -> torch::optim::AdamParamState& {
    return static_cast<torch::optim::AdamParamState&>(*a.state().at(state_key(p)));
  };
  torch::manual_seed(8);
  for (int s = 0; s < 5; ++s) {
    for (std::size_t i = 0; i < mem.size(); ++i) {
      mem[i].mutable_grad() = torch::randn_like(mem[i]) * (s + 1);
      off[i].mutable_grad() = mem[i].grad().clone();
    }
    if (s == 3) {  // moments from elsewhere (a migration): into the file at the next step
      auto& m = moments(in_file, off[1]);
      m.exp_avg(m.exp_avg().clone()), m.exp_avg_sq(m.exp_avg_sq().clone());
    }
    in_memory.step_divided(2);
    in_file.step_divided(2);
    for (std::size_t i = 0; i < mem.size(); ++i) {
      INFO("step " << s << ", parameter " << i);
      REQUIRE(torch::equal(mem[i], off[i]));
      auto &a = moments(in_memory, mem[i]), &b = moments(in_file, off[i]);
      REQUIRE(a.step() == b.step());
      REQUIRE(torch::equal(a.exp_avg(), b.exp_avg()));
      REQUIRE(torch::equal(a.exp_avg_sq(), b.exp_avg_sq()));
    }
  }
  // In the file, and none of it resident once let go of: the comparison above read it all.
  auto& big = moments(in_file, off[1]);
  const auto kept = big.exp_avg_sq().clone();
  REQUIRE(mapping_rss_kb(big.exp_avg().data_ptr()) >= 32 * 1024);  // read: both moments, 2 x 16 MB
  in_file.release_state();
  REQUIRE(mapping_rss_kb(big.exp_avg().data_ptr()) == 0);
  REQUIRE(mapping_rss_kb(big.exp_avg_sq().data_ptr()) == 0);
  REQUIRE(torch::equal(big.exp_avg_sq(), kept));  // let go of, not lost
  // A step leaves nothing resident either.
  for (auto& p : off) p.mutable_grad() = torch::ones_like(p);
  in_file.step_divided(1);
  REQUIRE(mapping_rss_kb(big.exp_avg().data_ptr()) == 0);
}

TEST_CASE("fused Adam refuses a place for its moments that is no directory, naming it", "[fused_adam][offload]") {
  auto p = torch::randn({5}).requires_grad_(true);
  fused_adam a({p}, torch::optim::AdamOptions(1e-3));
  a.offload_to("/nonexistent/dynapar");
  p.mutable_grad() = torch::ones_like(p);
  try {
    a.step_divided(1);
    FAIL("stepped without its file");
  } catch (const std::exception& e) {
    REQUIRE(std::string(e.what()).find("/nonexistent/dynapar") != std::string::npos);
  }
  REQUIRE_FALSE(dynapar::check_mapped_dir("/nonexistent/dynapar"));
  REQUIRE_FALSE(dynapar::check_mapped_dir("/proc/self/status"));
}

TEST_CASE("AdamW and SGD with momentum keep their state in a file with the bits of state in memory", "[offload]") {
  // Through make_optimizer, as a device makes its optimizer; LibTorch's own optimizers in memory
  // are the reference.
  for (const std::string kind : {"adamw", "sgd"}) {
    INFO(kind);
    temp_dir dir;
    optimizer_config mem_cfg;
    mem_cfg.kind = kind;
    mem_cfg.lr = 1e-2;
    mem_cfg.momentum = 0.9;
    mem_cfg.weight_decay = 0.01;
    auto file_cfg = mem_cfg;
    file_cfg.offload_dir = dir.path;
    auto mem = parameters(5), off = parameters(5);
    for (auto& p : mem) p.requires_grad_(true);
    for (auto& p : off) p.requires_grad_(true);
    auto in_memory = make_optimizer(mem, mem_cfg), in_file = make_optimizer(off, file_cfg);
    auto* file = dynamic_cast<state_in_file*>(in_file.get());
    REQUIRE(file != nullptr);
    REQUIRE(dynamic_cast<state_in_file*>(in_memory.get()) == nullptr);
    const auto state = [](torch::optim::Optimizer& o, const torch::Tensor& p) {
      std::vector<torch::Tensor> out;
      auto& s = *o.state().at(state_key(p));
      if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&s)) out = {a->exp_avg(), a->exp_avg_sq()};
      if (auto* g = dynamic_cast<torch::optim::SGDParamState*>(&s)) out = {g->momentum_buffer()};
      return out;
    };
    torch::manual_seed(8);
    for (int s = 0; s < 4; ++s) {
      std::vector<torch::Tensor> sums;
      for (auto& p : mem) sums.push_back(torch::randn_like(p) * (s + 1));
      if (s == 2) {  // state from elsewhere (a migration): into the file at the next step
        auto& st = *in_file->state().at(state_key(off[2]));
        if (auto* a = dynamic_cast<torch::optim::AdamWParamState*>(&st)) a->exp_avg(a->exp_avg().clone());
        if (auto* g = dynamic_cast<torch::optim::SGDParamState*>(&st)) g->momentum_buffer(g->momentum_buffer().clone());
      }
      step_on_sums(*in_memory, mem, sums, 4);
      step_on_sums(*in_file, off, sums, 4);
      for (std::size_t i = 0; i < mem.size(); ++i) {
        INFO("step " << s << ", parameter " << i);
        REQUIRE(torch::equal(mem[i], off[i]));
        const auto a = state(*in_memory, mem[i]), b = state(*in_file, off[i]);
        REQUIRE(a.size() == b.size());
        REQUIRE_FALSE(b.empty());
        for (std::size_t k = 0; k < a.size(); ++k) REQUIRE(torch::equal(a[k], b[k]));
      }
    }
    // In the file's mapping (a heap page would stay resident), let go of, its values kept.
    const auto big = state(*in_file, off[3]).front();
    const auto kept = big.clone();
    file->release_state();
    REQUIRE(mapping_rss_kb(big.data_ptr()) == 0);
    REQUIRE(torch::equal(big, kept));
  }
}
