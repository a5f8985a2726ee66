// `dynapar profile`: per-layer forward and backward times and sizes, measured here.
#include <chrono>

#include "model/boxes.hpp"

namespace dynapar::model {

result<planner::model_profile> measure_profile(const model_chain& m, int batch, int repeat, const optimizer_config& opt) {
  if (batch < 1 || repeat < 1) return make_error("bad_usage", "batch and repeat must be >= 1");
  planner::model_profile out;
  out.name = m.name;
  out.optimizer_state_factor = opt.kind == "sgd" ? 1 : 2;
  torch::Tensor x = torch::randn({batch, 1, 28, 28});
  using clock = std::chrono::steady_clock;
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    auto layer = deep_copy(m.layers[l]);
    torch::Tensor in = x.detach().requires_grad_(l > 0);
    double fwd = 0, bwd = 0;
    torch::Tensor y;
    for (int r = 0; r <= repeat; ++r) {  // run 0 warms up
      const auto t0 = clock::now();
      y = layer->forward(in);
      const auto t1 = clock::now();
      y.backward(torch::ones_like(y));
      const auto t2 = clock::now();
      if (r > 0) {
        fwd += std::chrono::duration<double>(t1 - t0).count();
        bwd += std::chrono::duration<double>(t2 - t1).count();
      }
    }
    planner::layer_profile lp;
    lp.name = m.names[l];
    lp.fwd_s = fwd / repeat / batch;
    lp.bwd_s = bwd / repeat / batch;
    lp.act_bytes = static_cast<double>(y[0].numel() * y.element_size());
    for (const auto& p : layer->parameters()) lp.param_bytes += static_cast<double>(p.numel() * p.element_size());
    lp.act_mem_bytes = 2 * lp.act_bytes + static_cast<double>(in[0].numel() * in.element_size());
    out.layers.push_back(lp);
    x = y.detach();
  }
  return out;
}

}  // namespace dynapar::model
