// Errors as values: result<T> holds either a value or an error naming what is wrong.
// Header-only, standard library only; used at every boundary that can meet bad input.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace dynapar {

struct error {
  std::string code;     // stable, machine-readable ("infeasible", "bad_field", ...)
  std::string message;  // for people: names the field or the input that is wrong
};

inline error make_error(std::string code, std::string message) {
  return error{std::move(code), std::move(message)};
}

template <class T>
class result {
 public:
  result(T value) : v_(std::move(value)) {}            // NOLINT: implicit by design
  result(error err) : v_(std::move(err)) {}            // NOLINT
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const error& err() const { return std::get<error>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, error> v_;
};

// For operations that return nothing but may fail.
struct ok_t {};
using status = result<ok_t>;
inline status ok_status() { return ok_t{}; }

}  // namespace dynapar
