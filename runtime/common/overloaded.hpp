// std::visit over a variant with one lambda per alternative.
#pragma once

namespace dynapar {

template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

}  // namespace dynapar
