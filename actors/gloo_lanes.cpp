#include "actors/gloo_lanes.hpp"

#include <algorithm>

namespace dynapar::actors {

void gloo_lanes::start(const std::string& store, std::int64_t generation, const std::vector<int>& holders, int rank, model::flat_grads g,
                       done_fn done) {
  if (generation < generation_) return done(make_error("gloo", "an abandoned attempt's sum"));
  if (generation > generation_) {
    for (auto& [name, l] : lanes_) {
      l.thread->close();
      retired_.push_back(std::move(l.thread));
    }
    lanes_.clear();
    generation_ = generation;
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(), [](const auto& r) { return r->ended(); }), retired_.end());
  }
  std::string name = "g" + std::to_string(generation) + "/";
  for (int h : holders) name += std::to_string(h) + ",";
  auto& l = lanes_[name];
  if (!l.thread) {
    l.group = std::make_shared<result<std::unique_ptr<model::gloo_group>>>(make_error("gloo", "not joined yet"));
    l.thread = std::make_unique<serial_lane>();
    l.thread->submit([group = l.group, store, name, host = host_, rank, size = static_cast<int>(holders.size()), t = timeout_s_] {
      *group = model::join_gloo_group(store, name, host, rank, size, t);
    });
  }
  l.thread->submit([group = l.group, g = std::move(g), done = std::move(done)] {
    if (!*group) return done(group->err());
    done((**group)->all_reduce(g));
  });
}

}  // namespace dynapar::actors
