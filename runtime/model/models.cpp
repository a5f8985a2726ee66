// Built-in models as chains of layers; each layer a Sequential so that it clones deeply.
#include <torch/csrc/jit/python/update_graph_executor_opt.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>

#include "model/boxes.hpp"

namespace dynapar::model {
namespace nn = torch::nn;

namespace {

// x + conv(relu(conv(x))), then relu: a residual block without batch statistics (so that a
// split run equals a single-device one exactly).
struct ResidualImpl : nn::Cloneable<ResidualImpl> {
  explicit ResidualImpl(int64_t channels) : channels_(channels) { reset(); }
  void reset() override {
    c1_ = register_module("c1", nn::Conv2d(nn::Conv2dOptions(channels_, channels_, 3).padding(1)));
    c2_ = register_module("c2", nn::Conv2d(nn::Conv2dOptions(channels_, channels_, 3).padding(1)));
  }
  torch::Tensor forward(torch::Tensor x) { return torch::relu(x + c2_(torch::relu(c1_(x)))); }
  int64_t channels_;
  nn::Conv2d c1_{nullptr}, c2_{nullptr};
};
TORCH_MODULE(Residual);

// Image rows as a sequence of tokens: [n, 1, r, c] -> [r, n, d], plus a learned position.
struct TokensImpl : nn::Cloneable<TokensImpl> {
  TokensImpl(int64_t rows, int64_t cols, int64_t d) : rows_(rows), cols_(cols), d_(d) { reset(); }
  void reset() override {
    proj_ = register_module("proj", nn::Linear(cols_, d_));
    pos_ = register_parameter("pos", torch::randn({rows_, 1, d_}) * 0.02);
  }
  torch::Tensor forward(torch::Tensor x) { return proj_(x.squeeze(1).transpose(0, 1)) + pos_; }
  int64_t rows_, cols_, d_;
  nn::Linear proj_{nullptr};
  torch::Tensor pos_;
};
TORCH_MODULE(Tokens);

// Mean over the sequence, then the classifier.
struct PoolHeadImpl : nn::Cloneable<PoolHeadImpl> {
  PoolHeadImpl(int64_t d, int64_t classes) : d_(d), classes_(classes) { reset(); }
  void reset() override { fc_ = register_module("fc", nn::Linear(d_, classes_)); }
  torch::Tensor forward(torch::Tensor x) { return fc_(x.mean(0)); }
  int64_t d_, classes_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(PoolHead);

// One top-level child of a TorchScript module as a layer. Each replica deep-copies the scripted
// module and registers its parameters, so optimizers and clones see them.
struct ScriptedImpl : nn::Cloneable<ScriptedImpl> {
  explicit ScriptedImpl(torch::jit::Module m) : module_(std::move(m)) { reset(); }
  void reset() override {
    module_ = module_.deepcopy();
    for (const auto& p : module_.named_parameters(/*recurse=*/true)) {
      std::string name = p.name;
      std::replace(name.begin(), name.end(), '.', '_');
      register_parameter(name, p.value);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    // The graph executor's optimisations specialise a method on what it has seen (does the
    // input require grad? how many runs so far?) and then differentiate some ops (layer_norm,
    // gelu) by their own formulas: a device thread, a stage whose input requires grad or a
    // replica fresh in another process then rounds differently from the reference.
    // Unoptimised, every run is the plain op sequence under eager autograd. The switch is
    // per thread, so it is set on the thread that runs the layer.
    torch::jit::setGraphExecutorOptimize(false);
    return module_.forward({x}).toTensor();
  }
  torch::jit::Module module_;
};
TORCH_MODULE(Scripted);

result<std::shared_ptr<const model_chain>> load_torchscript(const std::string& path) {
  auto m = std::make_shared<model_chain>();
  m->name = std::filesystem::path(path).stem().string();
  try {
    torch::jit::Module top = torch::jit::load(path);
    for (const auto& child : top.named_children()) {
      m->names.push_back(child.name);
      m->layers.push_back(nn::Sequential(Scripted(child.value)));
    }
  } catch (const c10::Error& e) {
    return make_error("bad_model", path + ": not a loadable TorchScript module: " + e.what_without_backtrace());
  }
  if (m->layers.empty()) return make_error("bad_model", path + ": a TorchScript model needs its layers as top-level children");
  return std::shared_ptr<const model_chain>(std::move(m));
}

void add(model_chain& m, std::string name, nn::Sequential s) {
  m.names.push_back(std::move(name));
  m.layers.push_back(std::move(s));
}

void build(model_chain& m) {
  if (m.name == "mlp") {  // 784-1024-1024-10
    add(m, "fc1+relu", nn::Sequential(nn::Flatten(), nn::Linear(784, 1024), nn::ReLU()));
    add(m, "fc2+relu", nn::Sequential(nn::Linear(1024, 1024), nn::ReLU()));
    add(m, "fc3", nn::Sequential(nn::Linear(1024, 10)));
  } else if (m.name == "cnn") {  // the Fashion-MNIST CNN of the planner's fmnist_cnn profile
    add(m, "conv1+relu+pool", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)));
    add(m, "conv2+relu+pool", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)));
    add(m, "fc1+relu", nn::Sequential(nn::Flatten(), nn::Linear(3136, 128), nn::ReLU()));
    add(m, "fc2", nn::Sequential(nn::Linear(128, 10)));
  } else if (m.name == "vgg") {  // VGG-style, 12.3 M parameters: a model worth a GPU
    add(m, "block1", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 64, 3).padding(1)), nn::ReLU(),
                                    nn::Conv2d(nn::Conv2dOptions(64, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)));
    add(m, "block2", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(64, 128, 3).padding(1)), nn::ReLU(),
                                    nn::Conv2d(nn::Conv2dOptions(128, 128, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)));
    add(m, "fc1+relu", nn::Sequential(nn::Flatten(), nn::Linear(128 * 7 * 7, 1536), nn::ReLU()));
    add(m, "fc2+relu", nn::Sequential(nn::Linear(1536, 1536), nn::ReLU()));
    add(m, "fc3", nn::Sequential(nn::Linear(1536, 10)));
  } else if (m.name == "resnet") {  // small ResNet-style: stem, 4 residual blocks, head
    add(m, "stem", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU()));
    add(m, "block1", nn::Sequential(Residual(16)));
    add(m, "block2+pool", nn::Sequential(Residual(16), nn::MaxPool2d(2)));
    add(m, "block3", nn::Sequential(Residual(16)));
    add(m, "block4+pool", nn::Sequential(Residual(16), nn::MaxPool2d(2)));
    add(m, "head", nn::Sequential(nn::Flatten(), nn::Linear(16 * 7 * 7, 10)));
  } else if (m.name == "transformer") {  // rows as 28 tokens, 2 encoder layers of width 64
    add(m, "tokens", nn::Sequential(Tokens(28, 28, 64)));
    for (int i = 0; i < 2; ++i)
      add(m, "encoder" + std::to_string(i),
          nn::Sequential(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0))));
    add(m, "pool+head", nn::Sequential(PoolHead(64, 10)));
  }
}

}  // namespace

const std::vector<std::string>& builtin_model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn", "resnet", "transformer", "vgg"};
  return names;
}

result<std::shared_ptr<const model_chain>> make_model(const std::string& name, std::uint64_t seed) {
  if (is_torchscript(name)) return load_torchscript(name);
  auto m = std::make_shared<model_chain>();
  m->name = name;
  torch::manual_seed(seed);
  build(*m);
  if (m->layers.empty()) {
    std::string known;
    for (const auto& n : builtin_model_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error("unknown_model", "unknown model '" + name + "' (built-in: " + known + "; or a TorchScript .pt file)");
  }
  return std::shared_ptr<const model_chain>(std::move(m));
}

int num_layers(const model_chain& m) { return static_cast<int>(m.layers.size()); }
std::string layer_name(const model_chain& m, int layer) { return m.names.at(layer); }
layer_copy copy_layer(const model_chain& m, int layer) {
  return std::make_shared<layer_box>(layer_box{deep_copy(m.layers.at(layer)), {}});
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params, const optimizer_config& o) {
  if (o.kind == "sgd")
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
}

std::unique_ptr<torch::optim::OptimizerParamState> copy_state(const torch::optim::OptimizerParamState& s, const torch::Device& to) {
  auto moved = [&](const torch::Tensor& t) { return t.to(to, /*non_blocking=*/false, /*copy=*/true); };
  if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(&s)) {
    auto out = std::make_unique<torch::optim::AdamParamState>();
    out->step(a->step());
    out->exp_avg(moved(a->exp_avg()));
    out->exp_avg_sq(moved(a->exp_avg_sq()));
    if (a->max_exp_avg_sq().defined()) out->max_exp_avg_sq(moved(a->max_exp_avg_sq()));
    return out;
  }
  if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    auto out = std::make_unique<torch::optim::SGDParamState>();
    if (g->momentum_buffer().defined()) out->momentum_buffer(moved(g->momentum_buffer()));
    return out;
  }
  return s.clone();
}

}  // namespace dynapar::model
