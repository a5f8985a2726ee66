#include "planner/profile.hpp"

#include <cmath>

namespace dynapar::planner {

status validate(const model_profile& model) {
  if (model.layers.empty()) return make_error("bad_profile", "model profile '" + model.name + "' has no layers");
  if (!std::isfinite(model.optimizer_state_factor) || model.optimizer_state_factor < 0)
    return make_error("bad_profile", "optimizer_state_factor must be a finite number >= 0");
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const auto& l = model.layers[i];
    const std::pair<const char*, double> fields[] = {
        {"fwd_s", l.fwd_s},         {"bwd_s", l.bwd_s},         {"fixed_s", l.fixed_s},
        {"act_bytes", l.act_bytes}, {"param_bytes", l.param_bytes}, {"act_mem_bytes", l.act_mem_bytes},
        {"update_s", l.update_s}};
    for (const auto& [field, v] : fields)
      if (!std::isfinite(v) || v < 0)
        return make_error("bad_profile", "layers[" + std::to_string(i) + "] ('" + l.name + "')." + field +
                                             " must be a finite number >= 0");
  }
  return ok_status();
}

profile_sums::profile_sums(const model_profile& model) {
  const std::size_t n = model.layers.size();
  for (auto* v : {&work_, &fwd_, &fixed_, &param_, &mem_, &act_, &update_}) v->assign(n + 1, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& l = model.layers[i];
    work_[i + 1] = work_[i] + l.fwd_s + l.bwd_s;
    fwd_[i + 1] = fwd_[i] + l.fwd_s;
    fixed_[i + 1] = fixed_[i] + l.fixed_s;
    param_[i + 1] = param_[i] + l.param_bytes;
    mem_[i + 1] = mem_[i] + l.act_mem_bytes;
    act_[i + 1] = l.act_bytes;
    update_[i + 1] = update_[i] + l.update_s;
  }
}

}  // namespace dynapar::planner
