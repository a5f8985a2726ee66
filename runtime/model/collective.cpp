#include "model/collective.hpp"

#include <chrono>

#include "model/boxes.hpp"

#ifdef DYNAPAR_GLOO_HEADERS
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace dynapar::model {

namespace {
#ifndef DYNAPAR_GLOO_HEADERS
error no_gloo() { return make_error("no_gloo", "built without Gloo (install libgloo-dev and rebuild)"); }
#endif

std::chrono::milliseconds millis(double s) { return std::chrono::milliseconds(static_cast<long long>(s * 1000)); }

#ifdef DYNAPAR_GLOO_HEADERS
struct store_impl : gloo_store {
  std::string host;
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::string endpoint() const override { return host + ":" + std::to_string(store->getPort()); }
};

struct group_impl : gloo_group {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  result<std::vector<tensor>> all_reduce(const flat_grads& g) override {
    try {
      std::vector<at::Tensor> t{g.flat->t};
      pg->allreduce(t)->wait();
      std::vector<tensor> out;
      std::int64_t at = 0;
      for (const auto& l : g.like) {
        const auto n = l->t.numel();
        out.push_back(box(g.flat->t.slice(0, at, at + n).view(l->t.sizes())));
        at += n;
      }
      return out;
    } catch (const std::exception& e) {
      return make_error("gloo", gloo_failure + std::string(e.what()));
    }
  }
};
#endif
}  // namespace

bool have_gloo() {
#ifdef DYNAPAR_GLOO_HEADERS
  return true;
#else
  return false;
#endif
}

result<std::unique_ptr<gloo_store>> start_gloo_store(const std::string& host) {
#ifdef DYNAPAR_GLOO_HEADERS
  try {
    c10d::TCPStoreOptions o;
    o.port = 0;  // any free port
    o.isServer = true;
    o.waitWorkers = false;
    auto s = std::make_unique<store_impl>();
    s->host = host;
    s->store = c10::make_intrusive<c10d::TCPStore>(host, o);
    return std::unique_ptr<gloo_store>(std::move(s));
  } catch (const std::exception& e) {
    return make_error("gloo", "the Gloo rendezvous on " + host + ": " + e.what());
  }
#else
  (void)host;
  return no_gloo();
#endif
}

result<flat_grads> flatten(const std::vector<grad_part>& mine) {
  if (mine.empty() || mine.front().grads.empty()) return make_error("bad_sum", "no gradients to add");
  flat_grads out;
  out.like = mine.front().grads;
  torch::Tensor sum;
  for (const auto& p : mine) {
    if (p.grads.size() != out.like.size()) return make_error("bad_sum", "partial sums of different layers");
    std::vector<torch::Tensor> views;
    for (const auto& g : p.grads) views.push_back(g->t.reshape({-1}));
    auto f = torch::cat(views);  // a copy, even of one parameter
    sum = sum.defined() ? sum + f : f;
  }
  out.flat = box(sum);
  return out;
}

result<std::unique_ptr<gloo_group>> join_gloo_group(const std::string& store, const std::string& name, const std::string& host, int rank,
                                                    int size, double timeout_s) {
#ifdef DYNAPAR_GLOO_HEADERS
  const auto colon = store.rfind(':');
  if (colon == std::string::npos) return make_error("bad_store", "the Gloo rendezvous '" + store + "' is not HOST:PORT");
  const int port = std::atoi(store.c_str() + colon + 1);
  if (port < 1 || port > 65535) return make_error("bad_store", "the Gloo rendezvous '" + store + "' has no port in 1-65535");
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.timeout = millis(timeout_s);
    auto client = c10::make_intrusive<c10d::TCPStore>(store.substr(0, colon), o);
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, client);
    auto opts = c10d::ProcessGroupGloo::Options::create(millis(timeout_s));
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    opts->threads = 1;  // one layer at a time; the device's lane orders them
    auto g = std::make_unique<group_impl>();
    g->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, opts);
    return std::unique_ptr<gloo_group>(std::move(g));
  } catch (const std::exception& e) {
    return make_error("gloo", "joining Gloo group " + name + " as rank " + std::to_string(rank) + " of " + std::to_string(size) + ": " + e.what());
  }
#else
  (void)store, (void)name, (void)host, (void)rank, (void)size, (void)timeout_s;
  return no_gloo();
#endif
}

result<std::vector<double>> gloo_allreduce_times(const std::string& store_file, int rank, int world, std::size_t floats,
                                                 int iters) {
#ifdef DYNAPAR_GLOO_HEADERS
  try {
    auto store = c10::make_intrusive<c10d::FileStore>(store_file, world);
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
    std::vector<double> times;
    for (int i = 0; i < iters + 3; ++i) {
      std::vector<at::Tensor> t{torch::full({static_cast<std::int64_t>(floats)}, static_cast<float>(rank + 1))};
      const auto t0 = std::chrono::steady_clock::now();
      pg->allreduce(t)->wait();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const float want = static_cast<float>(world * (world + 1) / 2);
      if (t[0][0].item<float>() != want) return make_error("bench", "Gloo's all-reduce returned a wrong sum");
      if (i >= 3) times.push_back(s);
    }
    return times;
  } catch (const std::exception& e) {
    return make_error("gloo", std::string("Gloo: ") + e.what());
  }
#else
  (void)store_file, (void)rank, (void)world, (void)floats, (void)iters;
  return no_gloo();
#endif
}

}  // namespace dynapar::model
