#include "planner/builtin_profiles.hpp"

#include <cmath>

namespace dynapar::planner {
namespace {

class builder {
 public:
  builder(std::string name, const profile_options& o) : o_(o) {
    m_.name = std::move(name);
    m_.optimizer_state_factor = o.optimizer_state_factor;
  }
  // flops: forward FLOPs per sample; params; out: values leaving the layer; kept: values
  // stored for backward, per sample.
  void layer(std::string name, double flops, double params, double out, double kept) {
    layer_profile l;
    l.name = std::move(name);
    l.fwd_s = flops / o_.reference_flops_per_s;
    l.bwd_s = o_.backward_factor * l.fwd_s;
    l.fixed_s = o_.overhead_per_layer_s;
    l.act_bytes = out * o_.bytes_per_value;
    l.param_bytes = params * o_.bytes_per_value;
    l.act_mem_bytes = kept * o_.bytes_per_value;
    m_.layers.push_back(std::move(l));
  }
  model_profile done() { return std::move(m_); }

 private:
  profile_options o_;
  model_profile m_;
};

double conv_flops(double cin, double cout, double k, double h, double w) { return 2 * cin * cout * k * k * h * w; }
double conv_params(double cin, double cout, double k) { return cin * cout * k * k + cout; }

model_profile mlp(const profile_options& o) {  // 784-1024-1024-10
  builder b("mlp", o);
  b.layer("fc1+relu", 2.0 * 784 * 1024, 784 * 1024 + 1024, 1024, 784 + 2 * 1024);
  b.layer("fc2+relu", 2.0 * 1024 * 1024, 1024 * 1024 + 1024, 1024, 1024 + 2 * 1024);
  b.layer("fc3", 2.0 * 1024 * 10, 1024 * 10 + 10, 10, 1024 + 10);
  return b.done();
}

model_profile fmnist_cnn(const profile_options& o) {  // 28x28x1 -> conv32 -> pool -> conv64 -> pool -> fc128 -> fc10
  builder b("fmnist_cnn", o);
  b.layer("conv1+relu+pool", conv_flops(1, 32, 3, 28, 28), conv_params(1, 32, 3), 32 * 14 * 14, 28 * 28 + 3 * 32 * 28 * 28);
  b.layer("conv2+relu+pool", conv_flops(32, 64, 3, 14, 14), conv_params(32, 64, 3), 64 * 7 * 7,
          32 * 14 * 14 + 3 * 64 * 14 * 14);
  b.layer("fc1+relu", 2.0 * 3136 * 128, 3136 * 128 + 128, 128, 3136 + 2 * 128);
  b.layer("fc2", 2.0 * 128 * 10, 128 * 10 + 10, 10, 128 + 10);
  return b.done();
}

model_profile vgg16(const profile_options& o) {  // 224x224x3, ImageNet
  builder b("vgg16", o);
  const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  double c = 3, hw = 224;
  int k = 0;
  for (std::size_t i = 0; i < std::size(cfg); ++i) {
    if (cfg[i] == 0) continue;
    const double cout = cfg[i];
    const bool pool = i + 1 < std::size(cfg) && cfg[i + 1] == 0;
    const double out_hw = pool ? hw / 2 : hw;
    b.layer("conv" + std::to_string(++k) + (pool ? "+pool" : ""), conv_flops(c, cout, 3, hw, hw), conv_params(c, cout, 3),
            cout * out_hw * out_hw, c * hw * hw + 2 * cout * hw * hw);
    c = cout;
    hw = out_hw;
  }
  b.layer("fc6", 2.0 * 25088 * 4096, 25088.0 * 4096 + 4096, 4096, 25088 + 2 * 4096);
  b.layer("fc7", 2.0 * 4096 * 4096, 4096.0 * 4096 + 4096, 4096, 3 * 4096);
  b.layer("fc8", 2.0 * 4096 * 1000, 4096.0 * 1000 + 1000, 1000, 4096 + 1000);
  return b.done();
}

// One layer per convolution (49) plus the classifier: the 50 layers of the name. A cut inside
// a bottleneck block also carries the block's input for the residual sum.
model_profile resnet50(const profile_options& o) {  // torchvision v1.5 layout, 224x224x3
  builder b("resnet50", o);
  b.layer("conv1+bn+relu+pool", conv_flops(3, 64, 7, 112, 112), conv_params(3, 64, 7) + 128, 64 * 56 * 56,
          3 * 224 * 224 + 3 * 64 * 112 * 112);
  const int blocks[] = {3, 4, 6, 3}, mids[] = {64, 128, 256, 512};
  double cin = 64, hw = 56;
  for (int s = 0; s < 4; ++s) {
    const double mid = mids[s], cout = 4 * mid;
    for (int k = 0; k < blocks[s]; ++k) {
      const bool first = k == 0;
      const double out_hw = (first && s > 0) ? hw / 2 : hw;
      const double skip = cin * hw * hw;  // the block input, alive until the residual sum
      const std::string name = "layer" + std::to_string(s + 1) + "." + std::to_string(k);
      // conv, bn and relu outputs are kept for backward.
      b.layer(name + ".conv1", conv_flops(cin, mid, 1, hw, hw), cin * mid + 2 * mid, mid * hw * hw + skip,
              cin * hw * hw + 3 * mid * hw * hw);
      b.layer(name + ".conv2", conv_flops(mid, mid, 3, out_hw, out_hw), 9 * mid * mid + 2 * mid,
              mid * out_hw * out_hw + skip, 3 * mid * out_hw * out_hw);
      double flops = conv_flops(mid, cout, 1, out_hw, out_hw), params = mid * cout + 2 * cout;
      if (first) {  // projection shortcut
        flops += conv_flops(cin, cout, 1, out_hw, out_hw);
        params += cin * cout + 2 * cout;
      }
      b.layer(name + ".conv3+add", flops, params, cout * out_hw * out_hw, 4 * cout * out_hw * out_hw);
      cin = cout;
      hw = out_hw;
    }
  }
  b.layer("avgpool+fc", 2.0 * 2048 * 1000 + 2048 * 49, 2048.0 * 1000 + 1000, 1000, 2048 * 49 + 2048 + 1000);
  return b.done();
}

// GPT-2-like chain: embedding, n transformer blocks, final norm + LM head. Activation memory
// per block from Korthikanti et al. 2022 (s h (34 + 5 a s / h) bytes at 16 bits), doubled for
// float32.
model_profile gpt2(const std::string& name, int layers, double d, double heads, const profile_options& o) {
  builder b(name, o);
  const double seq = 1024, vocab = 50257;
  b.layer("embedding", 2 * seq * d, vocab * d + seq * d, seq * d, seq * d);
  for (int i = 0; i < layers; ++i) {
    const double flops = 2 * seq * 12 * d * d + 2 * 2 * seq * seq * d;
    // X bytes at 16 bits are 2X bytes at 32 bits, i.e. X / 2 four-byte values.
    const double kept_values = seq * d * (34 + 5 * heads * seq / d) / 2;
    b.layer("block" + std::to_string(i), flops, 12 * d * d + 13 * d, seq * d, kept_values);
  }
  b.layer("ln_f+lm_head", 2 * seq * d * vocab, vocab * d + 2 * d, seq * 1, seq * d + seq * vocab);
  return b.done();
}

}  // namespace

const std::vector<std::string>& builtin_profile_names() {
  static const std::vector<std::string> names = {"mlp", "fmnist_cnn", "vgg16", "resnet50", "gpt2_small", "gpt2_xl"};
  return names;
}

result<model_profile> builtin_profile(const std::string& name, const profile_options& opt) {
  if (!(opt.reference_flops_per_s > 0)) return make_error("bad_profile", "reference_flops_per_s must be > 0");
  if (name == "mlp") return mlp(opt);
  if (name == "fmnist_cnn") return fmnist_cnn(opt);
  if (name == "vgg16") return vgg16(opt);
  if (name == "resnet50") return resnet50(opt);
  if (name == "gpt2_small") return gpt2("gpt2_small", 12, 768, 12, opt);
  if (name == "gpt2_xl") return gpt2("gpt2_xl", 48, 1600, 25, opt);
  std::string known;
  for (const auto& n : builtin_profile_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error("unknown_profile", "unknown built-in profile '" + name + "' (known: " + known + ")");
}

}  // namespace dynapar::planner
