// A user's TorchScript model as layers: each top-level child one layer, accepted only where
// the children in order compute the model's own forward (docs/MODELS.md).
#include "model/scripted.hpp"

#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "logging/logging.hpp"
#include "model/boxes.hpp"

namespace dynapar::model {
namespace {

// What LibTorch says, without the C++ frames it appends (c10::Error's backtrace) and cut at
// its first line: a user's error names the file and the problem, not LibTorch's call stack,
// which only --log-level debug shows.
std::string said(const std::exception& e) {
  logging::get("model")->debug("LibTorch's whole message: {}", e.what());
  const auto* c = dynamic_cast<const c10::Error*>(&e);
  std::string m = c ? c->what_without_backtrace() : e.what();
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  // The TorchScript interpreter's own traceback ends with the error it caught.
  if (m.rfind("The following operation failed", 0) == 0) m = m.substr(m.rfind('\n') + 1);
  if (const auto nl = m.find('\n'); nl != std::string::npos) m.resize(nl);
  return m;
}

const std::string exporter = "export it with tools/export/dynapar_export.py (docs/MODELS.md), which cuts a model's graph into such a chain";

thread_local std::int64_t draw_step = -1, draw_micro = -1;

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {  // splitmix64 of h ^ v
  std::uint64_t z = (h ^ v) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Ops that draw random numbers in a forward (dropout and its kin), through the methods and
// functions it calls.
bool draws_random(const torch::jit::Module& m) {
  static const char* kinds[] = {"dropout", "bernoulli", "rand", "normal", "multinomial", "uniform_", "exponential", "poisson"};
  std::set<torch::jit::Graph*> seen;
  std::function<bool(torch::jit::Graph&)> graph_draws;
  std::function<bool(torch::jit::Block*)> scan = [&](torch::jit::Block* b) {
    for (auto* n : b->nodes()) {
      const std::string k = n->kind().toQualString();
      for (const char* r : kinds)
        if (k.find(r) != std::string::npos) return true;
      if (n->kind() == c10::prim::CallMethod) {
        const auto t = n->input(0)->type()->cast<c10::ClassType>();
        if (t && graph_draws(*torch::jit::toGraphFunction(t->getMethod(n->s(c10::attr::name))).graph())) return true;
      } else if (n->kind() == c10::prim::CallFunction) {
        const auto f = n->input(0)->type()->cast<c10::FunctionType>();
        if (f && graph_draws(*torch::jit::toGraphFunction(*f->function()).graph())) return true;
      }
      for (auto* sub : n->blocks())
        if (scan(sub)) return true;
    }
    return false;
  };
  graph_draws = [&](torch::jit::Graph& g) { return seen.insert(&g).second && scan(g.block()); };
  return graph_draws(*m.get_method("forward").graph());
}

// One top-level child of a TorchScript module as a layer. Each replica deep-copies the scripted
// module and registers its parameters and running buffers (those a training forward changes:
// BatchNorm's statistics), so that optimizers, clones, migrations and checkpoints see them.
struct ScriptedImpl : torch::nn::Cloneable<ScriptedImpl> {
  ScriptedImpl(torch::jit::Module m, std::set<std::string> running, bool draws, std::uint64_t seed, int layer)
      : module_(std::move(m)), running_(std::move(running)), draws_(draws), seed_(seed), layer_(layer) {
    reset();
  }
  void reset() override {
    {
      // Device threads clone layers at once (migrations, copies); TorchScript's objects share
      // their class types and compilation unit, which it does not promise to copy safely
      // from several threads, so copies are made one at a time.
      static std::mutex copying;
      std::lock_guard<std::mutex> lock(copying);
      module_ = module_.deepcopy();
    }
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) register_parameter(flat(p.name), p.value);
    for (const auto& b : module_.named_buffers(/*recurse=*/true))
      if (running_.count(b.name)) register_buffer(flat(b.name), b.value);
  }
  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }
  torch::Tensor forward(torch::Tensor x) {
    // The graph executor's optimisations specialise a method on what it has seen (does the
    // input require grad? how many runs so far?) and then differentiate some ops (layer_norm,
    // gelu) by their own formulas: a device thread, a stage whose input requires grad or a
    // replica fresh in another process then rounds differently from the reference.
    // Unoptimised, every run is the plain op sequence under eager autograd. The switch is
    // per thread, so it is set on the thread that runs the layer.
    torch::jit::setGraphExecutorOptimize(false);
    if (!draws_ || !is_training()) return module_.forward({x}).toTensor();
    std::lock_guard<std::mutex> lock(draw_mutex());
    torch::manual_seed(mix(mix(mix(seed_, static_cast<std::uint64_t>(layer_)), static_cast<std::uint64_t>(draw_step)),
                           static_cast<std::uint64_t>(draw_micro)));
    return module_.forward({x}).toTensor();
  }
  static std::string flat(std::string name) {
    std::replace(name.begin(), name.end(), '.', '_');
    return name;
  }
  torch::jit::Module module_;
  std::set<std::string> running_;
  bool draws_;
  std::uint64_t seed_;
  int layer_;
};
TORCH_MODULE(Scripted);

std::string shape_of(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Where the top module's forward stops being "each child in order on the previous output"
// (through its own methods: torchvision's forward calls self._forward_impl): empty if it is
// exactly that.
class chain_walk {
 public:
  chain_walk(const torch::jit::Module& top, const std::vector<std::string>& children) : top_(top), children_(children) {}
  std::string first_difference() {
    if (!walk(*top_.get_method("forward").graph())) return where_;
    if (k_ != children_.size()) return "its forward skips child '" + children_[k_] + "'";
    return "";
  }

 private:
  // Walks one method of the top module whose input is the chain's current value; true if it
  // returns the chain's value after the children it called.
  bool walk(torch::jit::Graph& g) {
    if (g.inputs().size() != 2) return fail("a method of its own takes " + std::to_string(g.inputs().size() - 1) + " inputs");
    torch::jit::Value *self = g.inputs()[0], *cur = g.inputs()[1];
    for (auto* n : g.nodes()) {
      if (n->kind() == c10::prim::Constant) continue;
      if (n->kind() == c10::prim::GetAttr) {
        const auto t = n->output()->type()->cast<c10::ClassType>();
        if (t && t->is_module()) continue;
        return fail(after() + " its forward reads its own attribute '" + n->s(c10::attr::name) + "'" + before());
      }
      if (n->kind() == c10::prim::CallMethod && n->inputs().size() == 2) {
        const std::string method = n->s(c10::attr::name);
        if (n->inputs()[0] == self) {  // a method of its own, on the chain's value
          if (n->inputs()[1] != cur) return fail(after() + " its forward calls its method '" + method + "' on another value");
          if (!walk(*top_.get_method(method).graph())) return false;
          cur = n->output();
          continue;
        }
        auto* holder = n->inputs()[0]->node();
        const std::string name = holder->kind() == c10::prim::GetAttr ? holder->s(c10::attr::name) : "?";
        if (method != "forward" || k_ >= children_.size() || name != children_[k_])
          return fail(after() + " its forward calls child '" + name + "' out of order");
        if (n->inputs()[1] != cur) return fail("its forward calls child '" + name + "' on something other than the previous child's output");
        cur = n->output();
        ++k_;
        continue;
      }
      return fail(after() + " its forward computes " + std::string(n->kind().toQualString()) + before());
    }
    if (g.outputs().size() != 1 || g.outputs()[0] != cur) return fail(after() + " its forward returns something else than the last child's output");
    return true;
  }
  bool fail(std::string why) {
    where_ = std::move(why);
    return false;
  }
  std::string before() const { return k_ < children_.size() ? " (before child '" + children_[k_] + "')" : " (after its last child)"; }
  std::string after() const { return k_ == 0 ? std::string("before its first child") : "after child '" + children_[k_ - 1] + "'"; }

  const torch::jit::Module& top_;
  const std::vector<std::string>& children_;
  std::size_t k_ = 0;
  std::string where_;
};

}  // namespace

status save_torchscript(const std::string& source, const std::vector<std::string>& names, const std::vector<layer_copy>& layers,
                        const std::string& path) {
  try {
    torch::jit::ExtraFilesMap extra{{"dynapar.json", ""}};
    auto top = torch::jit::load(source, c10::nullopt, extra);
    if (layers.size() != names.size()) return make_error("bad_model", "the trained model has other layers than '" + source + "'");
    torch::NoGradGuard no_grad;
    for (std::size_t k = 0; k < layers.size(); ++k) {
      auto* scripted = layers[k]->module->ptr(0)->as<ScriptedImpl>();
      if (!scripted) return make_error("bad_model", "layer " + std::to_string(k) + " is not a TorchScript layer");
      auto child = top.attr(names[k]).toModule();
      auto copy_into = [](const auto& from, const auto& to) {
        for (const auto& t : to)
          for (const auto& f : from)
            if (f.name == t.name) t.value.copy_(f.value.to(t.value.device()));
      };
      copy_into(scripted->module_.named_parameters(true), child.named_parameters(true));
      copy_into(scripted->module_.named_buffers(true), child.named_buffers(true));
    }
    if (extra["dynapar.json"].empty()) extra.erase("dynapar.json");
    top.save(path, extra);
    return ok_status();
  } catch (const std::exception& e) {
    return make_error("io", "cannot write the trained model to '" + path + "': " + said(e));
  }
}

std::mutex& draw_mutex() {
  static std::mutex m;
  return m;
}

void set_draws(std::int64_t step, std::int64_t micro) {
  draw_step = step;
  draw_micro = micro;
}

result<std::shared_ptr<const model_chain>> load_torchscript(const std::string& path, std::uint64_t seed) {
  auto m = std::make_shared<model_chain>();
  m->name = std::filesystem::path(path).stem().string();
  m->source = path;
  auto refuse = [&](const std::string& why) { return make_error("bad_model", path + ": " + why + "; " + exporter); };
  torch::jit::Module top;
  torch::jit::ExtraFilesMap extra{{"dynapar.json", ""}};
  try {
    top = torch::jit::load(path, c10::nullopt, extra);
  } catch (const std::exception& e) {
    return make_error("bad_model", path + ": not a TorchScript module (expected a file of torch.jit.save, such as " +
                                       "tools/export/dynapar_export.py writes): " + said(e));
  }
  // The sample's shape and the classes: the exporter writes them; a hand-made file is taken
  // as images of 1x28x28 (Fashion-MNIST).
  std::vector<std::int64_t> input{1, 28, 28};
  std::int64_t vocab = 0;  // > 0: the samples are token ids below it
  if (!extra["dynapar.json"].empty()) {
    const auto meta = nlohmann::json::parse(extra["dynapar.json"], nullptr, /*allow_exceptions=*/false);
    if (meta.is_discarded() || !meta.contains("input") || !meta["input"].is_array())
      return make_error("bad_model", path + ": its dynapar.json entry is not the exporter's (no input shape)");
    input.clear();
    for (const auto& d : meta["input"]) {
      if (!d.is_number_integer() || d.get<std::int64_t>() <= 0 || d.get<std::int64_t>() > (1 << 16))
        return make_error("bad_model", path + ": dynapar.json: the input shape must be positive integers");
      input.push_back(d.get<std::int64_t>());
    }
    if (meta.contains("vocab")) {
      if (!meta["vocab"].is_number_integer() || meta["vocab"].get<std::int64_t>() < 0 || meta["vocab"].get<std::int64_t>() > (1 << 24))
        return make_error("bad_model", path + ": dynapar.json: vocab must be an integer in 0..2^24");
      vocab = meta["vocab"].get<std::int64_t>();
    }
  }
  if (input.size() != 3) return refuse("its samples are " + shape_of(input) + "; dynapar feeds images [channels, rows, cols]");
  if (const auto own = top.named_parameters(/*recurse=*/false); own.size() > 0)
    return refuse("parameter '" + (*own.begin()).name + "' belongs to the top module, outside its children (it would not be trained)");
  if (const auto own = top.named_buffers(/*recurse=*/false); own.size() > 0)
    return refuse("buffer '" + (*own.begin()).name + "' belongs to the top module, outside its children");
  std::vector<std::string> names;
  std::vector<torch::jit::Module> children;
  for (const auto& c : top.named_children()) {
    names.push_back(c.name);
    children.push_back(c.value);
  }
  if (children.empty()) return refuse("a model needs its layers as top-level children");
  if (const auto where = chain_walk(top, names).first_difference(); !where.empty())
    return refuse("running its children in order is not its forward: " + where);

  // The same on numbers, in training mode as it will run: the sample through the model's own
  // forward, and through the children one by one, each input a leaf that requires grad as a
  // pipeline stage's is (an in-place op on it fails there). Dropout draws the same numbers in
  // both, seeded alike. Copies, so that no running statistic moves in the file's layers.
  std::vector<std::int64_t> batch{2};
  batch.insert(batch.end(), input.begin(), input.end());
  std::vector<std::set<std::string>> running(children.size());
  torch::Tensor want, got;
  std::vector<std::uint8_t> draws;
  try {
    torch::jit::setGraphExecutorOptimize(false);
    std::lock_guard<std::mutex> lock(draw_mutex());
    torch::manual_seed(seed);
    const auto x = vocab > 0 ? torch::randint(0, vocab, batch).to(torch::kFloat32) : torch::randn(batch);
    auto whole = top.deepcopy();
    whole.train(true);
    torch::manual_seed(seed + 1);
    try {
      auto r = whole.forward({x.clone()});
      if (!r.isTensor()) return refuse("its forward does not return one tensor");
      want = r.toTensor();
    } catch (const std::exception& e) {
      return refuse("its forward fails on a sample of " + shape_of(batch) + ": " + said(e));
    }
    torch::manual_seed(seed + 1);
    got = x.clone();
    for (std::size_t k = 0; k < children.size(); ++k) {
      auto child = children[k].deepcopy();
      child.train(true);
      draws.push_back(draws_random(child));
      try {
        auto r = child.forward({got.detach().requires_grad_(k > 0)});
        if (!r.isTensor()) return refuse("child '" + names[k] + "' does not return one tensor");
        got = r.toTensor();
      } catch (const std::exception& e) {
        return refuse("child '" + names[k] + "' fails as a pipeline stage (its input a leaf that requires grad): " + said(e));
      }
      const auto before = children[k].named_buffers(/*recurse=*/true);
      for (const auto& b : child.named_buffers(/*recurse=*/true))
        for (const auto& o : before)
          if (o.name == b.name && !torch::equal(o.value, b.value)) {
            if (!b.value.is_floating_point() && b.value.scalar_type() != torch::kInt64)
              return refuse("child '" + names[k] + "' changes its buffer '" + b.name + "' of a type dynapar does not average");
            running[k].insert(b.name);
          }
    }
  } catch (const std::exception& e) {
    return refuse(std::string("cannot run it: ") + said(e));
  }
  if (!got.sizes().equals(want.sizes()) || !torch::equal(got.detach(), want.detach()))
    return refuse("running its children in order gives other numbers than its forward");
  if (want.dim() != 2 && !(want.dim() == 3 && vocab > 0))
    return refuse("its output per batch is " + shape_of(want.sizes().vec()) +
                  "; dynapar trains class scores [batch, classes] (or a token model's next-token scores [batch, positions, vocab])");

  m->io.channels = static_cast<int>(input[0]);
  m->io.rows = static_cast<int>(input[1]);
  m->io.cols = static_cast<int>(input[2]);
  m->io.classes = static_cast<int>(want.size(-1));
  m->io.positions = want.dim() == 3 ? static_cast<int>(want.size(1)) : 0;
  m->io.vocab = static_cast<int>(vocab);
  for (std::size_t k = 0; k < children.size(); ++k) {
    m->names.push_back(names[k]);
    m->layers.push_back(torch::nn::Sequential(Scripted(children[k], running[k], draws[k] != 0, seed, static_cast<int>(k))));
  }
  return std::shared_ptr<const model_chain>(std::move(m));
}

}  // namespace dynapar::model
