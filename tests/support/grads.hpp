// Gradients for the sum tests (peer_sum_test.cpp, device_sums_test.cpp): a layer of two
// parameters (7 and 4 values) whose float sum depends on the order of addition, and tensors
// back as values to compare bit for bit.
#pragma once

#include <random>
#include <vector>

#include "model/channel.hpp"  // tensor_of, values_of

namespace dynapar::test_support {

inline std::vector<model::tensor> grads_of(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> w(7), b(4);
  for (auto& x : w) x = u(rng) * (u(rng) > 0 ? 1e7f : 1e-3f);
  for (auto& x : b) x = u(rng);
  return {model::tensor_of(w, "cpu"), model::tensor_of(b, "cpu")};
}

inline std::vector<std::vector<float>> values(const std::vector<model::tensor>& ts) {
  std::vector<std::vector<float>> out;
  for (const auto& t : ts) out.push_back(model::values_of(t));
  return out;
}

}  // namespace dynapar::test_support
