// Built-in models as chains of layers; each layer a Sequential so that it clones deeply.
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "model/boxes.hpp"
#include "model/fused_adam.hpp"
#include "model/scripted.hpp"

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

// Image rows as a sequence of tokens, `per` rows to a token: [n, 1, r, c] -> [r / per, n, d],
// plus a learned position.
struct TokensImpl : nn::Cloneable<TokensImpl> {
  TokensImpl(int64_t rows, int64_t cols, int64_t d, int64_t per = 1) : rows_(rows), cols_(cols), d_(d), per_(per) { reset(); }
  void reset() override {
    proj_ = register_module("proj", nn::Linear(cols_ * per_, d_));
    pos_ = register_parameter("pos", torch::randn({rows_ / per_, 1, d_}) * 0.02);
  }
  torch::Tensor forward(torch::Tensor x) {
    return proj_(x.reshape({x.size(0), rows_ / per_, cols_ * per_}).transpose(0, 1)) + pos_;
  }
  int64_t rows_, cols_, d_, per_;
  nn::Linear proj_{nullptr};
  torch::Tensor pos_;
};
TORCH_MODULE(Tokens);

// Characters as tokens: ids (carried as floats, [n, 1, 1, t]) -> [t, n, d], a learned
// embedding plus a learned position. Ids need no gradient, so nothing flows back from here.
struct CharTokensImpl : nn::Cloneable<CharTokensImpl> {
  CharTokensImpl(int64_t vocab, int64_t len, int64_t d) : vocab_(vocab), len_(len), d_(d) { reset(); }
  void reset() override {
    embed_ = register_module("embed", nn::Embedding(vocab_, d_));
    pos_ = register_parameter("pos", torch::randn({len_, 1, d_}) * 0.02);
  }
  torch::Tensor forward(torch::Tensor x) {
    // Looked up in [t, n] order, so the activations are contiguous: a transposed view would
    // reach the next stage as it is but come back as a contiguous gradient, and the blocks'
    // backward would then round differently in a pipeline than on one device.
    const auto ids = x.detach().reshape({x.size(0), len_}).to(torch::kLong).clamp(0, vocab_ - 1).t().contiguous();
    return embed_(ids) + pos_;
  }
  int64_t vocab_, len_, d_;
  nn::Embedding embed_{nullptr};
  torch::Tensor pos_;
};
TORCH_MODULE(CharTokens);

// ResNet's basic block without batch statistics (as Residual): two 3x3 convolutions, a 1x1
// projection on the shortcut where the stride or the width changes.
struct BasicBlockImpl : nn::Cloneable<BasicBlockImpl> {
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) : in_(in), out_(out), stride_(stride) { reset(); }
  void reset() override {
    c1_ = register_module("c1", nn::Conv2d(nn::Conv2dOptions(in_, out_, 3).stride(stride_).padding(1)));
    c2_ = register_module("c2", nn::Conv2d(nn::Conv2dOptions(out_, out_, 3).padding(1)));
    if (stride_ != 1 || in_ != out_) proj_ = register_module("proj", nn::Conv2d(nn::Conv2dOptions(in_, out_, 1).stride(stride_)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto shortcut = proj_ ? proj_(x) : x;
    return torch::relu(shortcut + c2_(torch::relu(c1_(x))));
  }
  int64_t in_, out_, stride_;
  nn::Conv2d c1_{nullptr}, c2_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(BasicBlock);

// A GPT block: pre-norm causal self-attention and a GELU MLP, each around a residual; the
// sequence is [t, n, d]. Each position sees itself and those before it.
struct DecoderBlockImpl : nn::Cloneable<DecoderBlockImpl> {
  DecoderBlockImpl(int64_t d, int64_t heads) : d_(d), heads_(heads) { reset(); }
  void reset() override {
    ln1_ = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d_})));
    attn_ = register_module("attn", nn::MultiheadAttention(nn::MultiheadAttentionOptions(d_, heads_)));
    ln2_ = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d_})));
    up_ = register_module("up", nn::Linear(d_, 4 * d_));
    down_ = register_module("down", nn::Linear(4 * d_, d_));
  }
  torch::Tensor forward(torch::Tensor x) {
    const auto t = x.size(0);
    auto future = torch::ones({t, t}, torch::TensorOptions(torch::kBool).device(x.device())).triu(1);
    auto h = ln1_(x);
    x = x + std::get<0>(attn_->forward(h, h, h, /*key_padding_mask=*/torch::Tensor(), /*need_weights=*/false, future));
    return x + down_(torch::gelu(up_(ln2_(x))));
  }
  int64_t d_, heads_;
  nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  nn::MultiheadAttention attn_{nullptr};
  nn::Linear up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(DecoderBlock);

// The final norm and the classifier on the last position (the one that has seen them all).
struct LastTokenHeadImpl : nn::Cloneable<LastTokenHeadImpl> {
  LastTokenHeadImpl(int64_t d, int64_t classes) : d_(d), classes_(classes) { reset(); }
  void reset() override {
    ln_ = register_module("ln", nn::LayerNorm(nn::LayerNormOptions({d_})));
    fc_ = register_module("fc", nn::Linear(d_, classes_));
  }
  torch::Tensor forward(torch::Tensor x) { return fc_(ln_(x[x.size(0) - 1])); }
  int64_t d_, classes_;
  nn::LayerNorm ln_{nullptr};
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(LastTokenHead);

// The final norm and the classifier on every position: a language model's next-token scores,
// [n, t, classes] (loss next_token). Causal blocks let each position see only those before.
struct TokenHeadImpl : nn::Cloneable<TokenHeadImpl> {
  TokenHeadImpl(int64_t d, int64_t classes) : d_(d), classes_(classes) { reset(); }
  void reset() override {
    ln_ = register_module("ln", nn::LayerNorm(nn::LayerNormOptions({d_})));
    fc_ = register_module("fc", nn::Linear(d_, classes_));
  }
  torch::Tensor forward(torch::Tensor x) { return fc_(ln_(x)).transpose(0, 1).contiguous(); }
  int64_t d_, classes_;
  nn::LayerNorm ln_{nullptr};
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(TokenHead);

// Mean over the sequence, then the classifier.
struct PoolHeadImpl : nn::Cloneable<PoolHeadImpl> {
  PoolHeadImpl(int64_t d, int64_t classes) : d_(d), classes_(classes) { reset(); }
  void reset() override { fc_ = register_module("fc", nn::Linear(d_, classes_)); }
  torch::Tensor forward(torch::Tensor x) { return fc_(x.mean(0)); }
  int64_t d_, classes_;
  nn::Linear fc_{nullptr};
};
TORCH_MODULE(PoolHead);

// Which of a built-in model's layers to build, and from what seed. Each layer's parameters
// are drawn from a seed of the job's seed and the layer's index alone, so that a process can
// build any one layer by itself, bit for bit as the whole model has it (make_layer).
struct build_spec {
  std::uint64_t seed = 0;
  int only = -1;  // >= 0: only this layer; the others stay empty Sequentials
};

// A seed for layer `index` of a model seeded `seed` (splitmix64 of the two).
std::uint64_t layer_seed(std::uint64_t seed, std::size_t index) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <class Make>
void add(model_chain& m, const build_spec& spec, std::string name, Make make) {
  const auto index = m.layers.size();
  m.names.push_back(std::move(name));
  if (spec.only >= 0 && static_cast<std::size_t>(spec.only) != index) {
    m.layers.push_back(nn::Sequential());
    return;
  }
  std::lock_guard<std::mutex> lock(draw_mutex());
  torch::manual_seed(layer_seed(spec.seed, index));
  m.layers.push_back(make());
}

void build(model_chain& m, const build_spec& spec) {
  if (m.name == "mlp") {  // 784-1024-1024-10
    add(m, spec, "fc1+relu", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(784, 1024), nn::ReLU()); });
    add(m, spec, "fc2+relu", [&] { return nn::Sequential(nn::Linear(1024, 1024), nn::ReLU()); });
    add(m, spec, "fc3", [&] { return nn::Sequential(nn::Linear(1024, 10)); });
  } else if (m.name == "wide") {  // 784-4096-4096-4096-10, 37.5 M parameters (150 MB): a model of which a node holds a part
    add(m, spec, "fc1+relu", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(784, 4096), nn::ReLU()); });
    add(m, spec, "fc2+relu", [&] { return nn::Sequential(nn::Linear(4096, 4096), nn::ReLU()); });
    add(m, spec, "fc3+relu", [&] { return nn::Sequential(nn::Linear(4096, 4096), nn::ReLU()); });
    add(m, spec, "fc4", [&] { return nn::Sequential(nn::Linear(4096, 10)); });
  } else if (m.name == "wide_xl") {  // 784-4096, 60 x 4096-4096, 4096-10: 1.01 B parameters (4.0 GB; 12 GB with Adam's moments)
    // The model of the benchmark no one process holds (docs/BENCHMARKS.md, "A model larger than any process").
    add(m, spec, "fc1+relu", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(784, 4096), nn::ReLU()); });
    for (int i = 0; i < 60; ++i) add(m, spec, "fc" + std::to_string(i + 2) + "+relu", [&] { return nn::Sequential(nn::Linear(4096, 4096), nn::ReLU()); });
    add(m, spec, "fc62", [&] { return nn::Sequential(nn::Linear(4096, 10)); });
  } else if (m.name == "linear") {  // one Linear(784, 10), 7,850 parameters: for measuring the control plane
    add(m, spec, "fc", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(784, 10)); });
  } else if (m.name == "cnn") {  // the Fashion-MNIST CNN of the planner's fmnist_cnn profile
    add(m, spec, "conv1+relu+pool", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)); });
    add(m, spec, "conv2+relu+pool", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)); });
    add(m, spec, "fc1+relu", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(3136, 128), nn::ReLU()); });
    add(m, spec, "fc2", [&] { return nn::Sequential(nn::Linear(128, 10)); });
  } else if (m.name == "vgg") {  // VGG-style, 12.3 M parameters: a model worth a GPU
    add(m, spec, "block1", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 64, 3).padding(1)), nn::ReLU(),
                                    nn::Conv2d(nn::Conv2dOptions(64, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)); });
    add(m, spec, "block2", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(64, 128, 3).padding(1)), nn::ReLU(),
                                    nn::Conv2d(nn::Conv2dOptions(128, 128, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2)); });
    add(m, spec, "fc1+relu", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(128 * 7 * 7, 1536), nn::ReLU()); });
    add(m, spec, "fc2+relu", [&] { return nn::Sequential(nn::Linear(1536, 1536), nn::ReLU()); });
    add(m, spec, "fc3", [&] { return nn::Sequential(nn::Linear(1536, 10)); });
  } else if (m.name == "resnet") {  // small ResNet-style: stem, 4 residual blocks, head
    add(m, spec, "stem", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU()); });
    add(m, spec, "block1", [&] { return nn::Sequential(Residual(16)); });
    add(m, spec, "block2+pool", [&] { return nn::Sequential(Residual(16), nn::MaxPool2d(2)); });
    add(m, spec, "block3", [&] { return nn::Sequential(Residual(16)); });
    add(m, spec, "block4+pool", [&] { return nn::Sequential(Residual(16), nn::MaxPool2d(2)); });
    add(m, spec, "head", [&] { return nn::Sequential(nn::Flatten(), nn::Linear(16 * 7 * 7, 10)); });
  } else if (m.name == "resnet18") {  // ResNet-18's widths and blocks, 11.2 M parameters, 1x28x28 in
    // The stem halves the image (28 -> 14) as ResNet's 7x7/2 stem does, so 2 cores train it.
    add(m, spec, "stem", [&] { return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 64, 3).stride(2).padding(1)), nn::ReLU()); });
    const int64_t widths[] = {64, 128, 256, 512};
    int64_t in = 64;
    for (int s = 0; s < 4; ++s) {
      for (int b = 0; b < 2; ++b) {
        add(m, spec, "stage" + std::to_string(s + 1) + (b ? "b" : "a"), [&] { return nn::Sequential(BasicBlock(in, widths[s], s > 0 && b == 0 ? 2 : 1)); });
        in = widths[s];
      }
    }
    add(m, spec, "pool+fc", [&] { return nn::Sequential(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)), nn::Flatten(), nn::Linear(512, 10)); });
  } else if (m.name == "gpt") {  // GPT-style decoder, 6 blocks of width 384, 10.7 M parameters
    // Tokens are pairs of image rows (14 tokens of 56 pixels); the class is read at the last.
    add(m, spec, "tokens", [&] { return nn::Sequential(Tokens(28, 28, 384, 2)); });
    for (int i = 0; i < 6; ++i) add(m, spec, "block" + std::to_string(i), [&] { return nn::Sequential(DecoderBlock(384, 6)); });
    add(m, spec, "norm+head", [&] { return nn::Sequential(LastTokenHead(384, 10)); });
  } else if (m.name == "gpt_text") {  // the same decoder on text: 32 characters in, the next out
    m.io.rows = 1, m.io.cols = 32, m.io.vocab = 128, m.io.classes = 128;
    add(m, spec, "tokens", [&] { return nn::Sequential(CharTokens(128, 32, 384)); });
    for (int i = 0; i < 6; ++i) add(m, spec, "block" + std::to_string(i), [&] { return nn::Sequential(DecoderBlock(384, 6)); });
    add(m, spec, "norm+head", [&] { return nn::Sequential(LastTokenHead(384, 128)); });
  } else if (m.name == "gpt_lm") {  // a small decoder as a language model: 32 characters in, each one's next out
    m.io.rows = 1, m.io.cols = 32, m.io.vocab = 128, m.io.classes = 128, m.io.positions = 32;
    add(m, spec, "tokens", [&] { return nn::Sequential(CharTokens(128, 32, 128)); });
    for (int i = 0; i < 4; ++i) add(m, spec, "block" + std::to_string(i), [&] { return nn::Sequential(DecoderBlock(128, 4)); });
    add(m, spec, "norm+head", [&] { return nn::Sequential(TokenHead(128, 128)); });
  } else if (m.name == "transformer") {  // rows as 28 tokens, 2 encoder layers of width 64
    add(m, spec, "tokens", [&] { return nn::Sequential(Tokens(28, 28, 64)); });
    for (int i = 0; i < 2; ++i)
      add(m, spec, "encoder" + std::to_string(i), [&] { return nn::Sequential(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128).dropout(0.0))); });
    add(m, spec, "pool+head", [&] { return nn::Sequential(PoolHead(64, 10)); });
  }
}

std::size_t parameter_bytes(const nn::Sequential& s) {
  std::size_t n = 0;
  for (const auto& p : s->parameters()) n += static_cast<std::size_t>(p.nbytes());
  return n;
}

}  // namespace

const std::vector<std::string>& builtin_model_names() {
  static const std::vector<std::string> names = {"mlp", "linear", "wide", "wide_xl", "cnn", "resnet", "transformer", "vgg", "resnet18", "gpt", "gpt_text", "gpt_lm"};
  return names;
}

result<std::shared_ptr<const model_chain>> make_model(const std::string& name, std::uint64_t seed, bool outline) {
  if (is_torchscript(name)) return load_torchscript(name, seed);
  auto m = std::make_shared<model_chain>();
  m->name = name;
  m->seed = seed;
  m->outline = outline;
  build(*m, {seed, outline ? std::numeric_limits<int>::max() : -1});
  for (int l = 0; outline && l < num_layers(*m); ++l) {  // one layer at a time: its sizes, then it goes
    const auto one = layer_module(*m, l);
    m->outline_bytes.push_back(parameter_bytes(one));
    m->outline_params.push_back(one->parameters().size());
  }
  if (m->layers.empty()) {
    std::string known;
    for (const auto& n : builtin_model_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error("unknown_model", "unknown model '" + name + "' (built-in: " + known + "; or a TorchScript .pt file)");
  }
  return std::shared_ptr<const model_chain>(std::move(m));
}

result<layer_copy> make_layer(const std::string& name, std::uint64_t seed, int index) {
  auto s = layer_source::open(name, seed);
  if (!s) return s.err();
  return s->fresh(index);
}

result<layer_source> layer_source::open(const std::string& name, std::uint64_t seed) {
  if (is_torchscript(name)) {
    auto m = load_torchscript(name, seed);
    if (!m) return m.err();
    return of(*m);
  }
  model_chain outline;  // the layers' names and count; none built
  outline.name = name;
  build(outline, {seed, std::numeric_limits<int>::max()});
  if (outline.layers.empty()) return make_model(name, seed).err();  // unknown: its error lists the built-in names
  layer_source s;
  s.name_ = name;
  s.seed_ = seed;
  s.layers_ = model::num_layers(outline);
  return s;
}

layer_source layer_source::of(std::shared_ptr<const model_chain> whole) {
  layer_source s;
  s.name_ = whole->name;
  s.layers_ = model::num_layers(*whole);
  s.whole_ = std::move(whole);
  return s;
}

result<std::shared_ptr<const model_chain>> layer_source::chain_for(int layer) const {
  if (layer < 0 || layer >= layers_)
    return make_error("bad_layer", "model '" + name_ + "' has " + std::to_string(layers_) + " layers; no layer " + std::to_string(layer));
  if (whole_) return whole_;
  auto one = std::make_shared<model_chain>();  // this layer built, the others empty
  one->name = name_;
  build(*one, {seed_, layer});
  return std::shared_ptr<const model_chain>(std::move(one));
}

result<layer_copy> layer_source::fresh(int layer) const {
  auto c = chain_for(layer);
  if (!c) return c.err();
  return copy_layer(**c, layer);
}

result<layer_copy> layer_source::from_wire(int layer, const layer_wire& w) const {
  auto c = chain_for(layer);
  if (!c) return c.err();
  return model::from_wire(**c, layer, w);
}

status save_model(const model_chain& m, const std::vector<layer_copy>& layers, const std::string& path) {
  if (m.source.empty()) return make_error("bad_flag", "--save-model: model '" + m.name + "' is built in; only a TorchScript model is written back");
  return save_torchscript(m.source, m.names, layers, path);
}

int num_layers(const model_chain& m) { return static_cast<int>(m.layers.size()); }

torch::nn::Sequential layer_module(const model_chain& m, int layer) {
  if (!m.outline) return deep_copy(m.layers.at(layer));
  model_chain one;  // this layer built, the others empty
  one.name = m.name;
  build(one, {m.seed, layer});
  return one.layers.at(layer);
}

std::size_t param_bytes(const model_chain& m, int layer) {
  return m.outline ? m.outline_bytes.at(layer) : parameter_bytes(m.layers.at(layer));
}

std::size_t param_count(const model_chain& m, int layer) {
  return m.outline ? m.outline_params.at(layer) : m.layers.at(layer)->parameters().size();
}

status check_data(const model_chain& m, const data::dataset& d) {
  const auto& io = m.io;
  const bool tokens = io.vocab > 0;
  // Samples as [channels, rows, cols].
  auto what = [](bool t, int channels, int rows, int cols) {
    return t ? "text windows of " + std::to_string(cols) + " tokens"
             : "images of [" + std::to_string(channels) + ", " + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  };
  if (d.target_ids > 0 && io.positions != d.target_ids)
    return make_error("bad_job", "loss next_token scores every position of a window of " + std::to_string(d.target_ids) + " tokens; model '" + m.name +
                                     "' gives " + (io.positions > 0 ? "scores for " + std::to_string(io.positions) + " positions" : "one score vector a sample") +
                                     " (its output must be [batch, " + std::to_string(d.target_ids) + ", vocab])");
  if (d.target_ids == 0 && io.positions > 0)
    return make_error("bad_job", "model '" + m.name + "' scores " + std::to_string(io.positions) +
                                     " positions a sample, a language model's output: train it with loss next_token");
  if (d.target_values > 0 && io.classes > 0 && io.classes != d.target_values)
    return make_error("bad_job", "model '" + m.name + "' gives " + std::to_string(io.classes) + " values a sample; the data regress " +
                                     std::to_string(d.target_values) + " (loss mse: one output a target value)");
  if (tokens != d.tokens || io.channels != d.channels || io.rows != d.rows || io.cols != d.cols || (io.classes > 0 && d.classes > io.classes))
    return make_error("bad_job", "model '" + m.name + "' takes " + what(tokens, io.channels, io.rows, io.cols) + " in " +
                                     std::to_string(io.classes) + " classes; the data are " + what(d.tokens, d.channels, d.rows, d.cols) + " in " +
                                     std::to_string(d.classes) + " classes");
  return ok_status();
}
std::string layer_name(const model_chain& m, int layer) { return m.names.at(layer); }
layer_copy copy_layer(const model_chain& m, int layer) {
  return std::make_shared<layer_box>(layer_box{layer_module(m, layer), {}, {}});
}

status check_optimizer(const optimizer_config& o) {
  if (o.kind != "adam" && o.kind != "adamw" && o.kind != "sgd")
    return make_error("bad_optimizer", "optimizer kind '" + o.kind + "' is not adam, adamw or sgd");
  if (!(std::isfinite(o.lr) && o.lr > 0)) return make_error("bad_optimizer", "optimizer lr must be > 0");
  if (!(std::isfinite(o.momentum) && o.momentum >= 0) || !(std::isfinite(o.weight_decay) && o.weight_decay >= 0))
    return make_error("bad_optimizer", "optimizer momentum and weight_decay must be >= 0");
  if (o.nesterov && (o.kind != "sgd" || !(o.momentum > 0)))
    return make_error("bad_optimizer", "optimizer nesterov needs kind sgd and momentum > 0");
  if (!(o.label_smoothing >= 0 && o.label_smoothing < 1)) return make_error("bad_optimizer", "label_smoothing must be in [0, 1)");
  if (!(std::isfinite(o.clip_grad_norm) && o.clip_grad_norm >= 0)) return make_error("bad_optimizer", "clip_grad_norm must be >= 0 (0: off)");
  // A device's cosine schedule knows its length (prepare_job set it).
  if (o.schedule.kind == "cosine" && o.schedule.steps == 0) return make_error("bad_optimizer", "cosine schedule without its steps");
  if (auto st = check_schedule(o.schedule, o.lr); !st) return make_error("bad_optimizer", st.err().message);
  return ok_status();
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(std::vector<torch::Tensor> params, const optimizer_config& o) {
  if (o.kind == "sgd") {
    const auto so = torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay).nesterov(o.nesterov);
    // Plain SGD keeps no state: nothing to put in a file.
    if (!o.offload_dir.empty() && o.momentum > 0) return std::make_unique<offloaded_sgd>(params, so, o.offload_dir);
    return std::make_unique<torch::optim::SGD>(params, so);
  }
  if (o.kind == "adamw") {
    const auto ao = torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay);
    if (!o.offload_dir.empty()) return std::make_unique<offloaded_adamw>(params, ao, o.offload_dir);
    return std::make_unique<torch::optim::AdamW>(params, ao);
  }
  auto adam = std::make_unique<fused_adam>(params, torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay));
  if (!o.offload_dir.empty()) adam->offload_to(o.offload_dir);
  return adam;
}

void step_on_sums(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& sums,
                  double divisor, double lr, double scale) {
  torch::NoGradGuard no_grad;
  if (lr >= 0)
    for (auto& g : opt.param_groups()) g.options().set_lr(lr);
  // The fused Adam divides in its own loop. A clipped gradient is divided, then scaled, as
  // clip_grad_norm_ scales the gradient it was given (the fused loop then divides by 1: x / 1 is x).
  auto* adam = dynamic_cast<fused_adam*>(&opt);
  const bool fused_divide = adam && scale == 1;
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i].mutable_grad() = fused_divide ? sums[i] : scale == 1 ? sums[i] / divisor : (sums[i] / divisor).mul_(scale);
  if (!adam) {
    opt.step();
    return;
  }
  adam->step_divided(fused_divide ? divisor : 1);
  // Let go of the sums: a later backward would add into a kept one in place, through every
  // parameter that shares it.
  for (auto& p : params) p.mutable_grad() = torch::Tensor();
}

std::vector<float> grad_norms(const std::vector<tensor>& summed, double divisor) {
  torch::NoGradGuard no_grad;
  std::vector<float> out;
  out.reserve(summed.size());
  for (const auto& t : summed) out.push_back(t ? (t->t / divisor).norm().item<float>() : 0.0f);
  return out;
}

double clip_scale(const std::vector<float>& norms, double max_norm) {
  torch::NoGradGuard no_grad;
  if (norms.empty()) return 1;
  // Float32 throughout, as clip_grad_norm_ (one norm is the total as it is; max_norm / t is
  // t.reciprocal() * max_norm).
  const auto total = norms.size() == 1 ? torch::tensor(norms[0]) : torch::tensor(norms, torch::kFloat32).norm();
  const auto coef = torch::clamp((total + 1e-6).reciprocal() * max_norm, c10::nullopt, 1.0);
  return static_cast<double>(coef.item<float>());
}

std::unique_ptr<torch::optim::OptimizerParamState> copy_state(const torch::optim::OptimizerParamState& s, const torch::Device& to) {
  auto moved = [&](const torch::Tensor& t) { return t.to(to, /*non_blocking=*/false, /*copy=*/true); };
  // Adam's and AdamW's states hold the same (AdamW's is its own type).
  auto adam = [&](const auto& a, auto out) -> std::unique_ptr<torch::optim::OptimizerParamState> {
    out->step(a.step());
    out->exp_avg(moved(a.exp_avg()));
    out->exp_avg_sq(moved(a.exp_avg_sq()));
    if (a.max_exp_avg_sq().defined()) out->max_exp_avg_sq(moved(a.max_exp_avg_sq()));
    return out;
  };
  if (const auto* a = dynamic_cast<const torch::optim::AdamParamState*>(&s))
    return adam(*a, std::make_unique<torch::optim::AdamParamState>());
  if (const auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(&s))
    return adam(*a, std::make_unique<torch::optim::AdamWParamState>());
  if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    auto out = std::make_unique<torch::optim::SGDParamState>();
    if (g->momentum_buffer().defined()) out->momentum_buffer(moved(g->momentum_buffer()));
    return out;
  }
  return s.clone();
}

}  // namespace dynapar::model
