#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "data/read_ahead.hpp"

using namespace dynapar;

namespace {

// A decoding store whose values are a formula of sample and step (the reference), counting
// its reads; sample `bad` does not decode.
class formula_store final : public data::sample_store {
 public:
  explicit formula_store(int bad = -1) : bad_(bad) {}
  int size() const override { return 100; }
  void values(int i, std::int64_t step, float* out) const override {
    reads_.fetch_add(1);
    if (i == bad_) throw std::runtime_error("s" + std::to_string(i) + ".png (sample " + std::to_string(i) + "): does not decode");
    for (int k = 0; k < 3; ++k) out[k] = static_cast<float>(i * 1000 + step * 10 + k);
  }
  std::int64_t label(int i) const override { return i % 7; }
  std::uint64_t fingerprint() const override { return 42; }
  std::int64_t samples_read() const override { return reads_.load(); }
  bool decodes() const override { return true; }

 private:
  int bad_;
  mutable std::atomic<std::int64_t> reads_{0};
};

std::vector<float> want(int i, std::int64_t step) {
  return {static_cast<float>(i * 1000 + step * 10), static_cast<float>(i * 1000 + step * 10 + 1), static_cast<float>(i * 1000 + step * 10 + 2)};
}

std::vector<float> got(const data::sample_store& s, int i, std::int64_t step) {
  std::vector<float> v(3);
  s.values(i, step, v.data());
  return v;
}

}  // namespace

TEST_CASE("read-ahead: samples made before their reads are the store's own values, each decoded once, its errors where they were", "[unit][data]") {
  auto inner = std::make_shared<formula_store>(5);
  data::read_ahead r(inner, 3, 2);
  CHECK(r.size() == 100);
  CHECK(r.fingerprint() == 42);
  CHECK(r.label(9) == 2);
  std::vector<int> ids{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  r.ahead(ids, 3);
  for (const int i : ids) {
    if (i == 5) {
      CHECK_THROWS_WITH(got(r, 5, 3), "s5.png (sample 5): does not decode");
      continue;
    }
    CHECK(got(r, i, 3) == want(i, 3));
  }
  CHECK(r.read_ahead_figures().ahead == 10);
  CHECK(inner->samples_read() == 10);  // none decoded twice
  CHECK(r.samples_read() == 10);      // what its reads took
  r.ahead({60, 61}, 3);
  CHECK(r.samples_read() == 10);      // a guess not (yet) taken is not a read
  CHECK(r.read_ahead_figures().when_read == 0);
  CHECK(r.read_ahead_figures().waited_s >= 0);
  // Not asked for: decoded by the read, as without read-ahead.
  CHECK(got(r, 50, 3) == want(50, 3));
  CHECK(r.read_ahead_figures().when_read == 1);
  CHECK(r.read_ahead_figures().ahead == 10);
  // Another step's draw is another sample: asked for step 4, read for step 4 only.
  r.ahead({20, 21}, 4);
  CHECK(got(r, 20, 4) == want(20, 4));
  CHECK(got(r, 21, 5) == want(21, 5));  // not made for step 5: decoded here
  CHECK(r.read_ahead_figures().ahead == 11);
  // A step's samples stay through the next step's ask (a probe's rest reads them later), and
  // go at the ask after; read anyway, they are decoded again. One thread: made in order.
  data::read_ahead one(std::make_shared<formula_store>(), 3, 1);
  one.ahead({30, 31, 32}, 6);
  one.ahead({40}, 7);
  CHECK(got(one, 40, 7) == want(40, 7));  // made last: 30, 31 and 32 are made too
  CHECK(got(one, 30, 6) == want(30, 6));
  CHECK(one.read_ahead_figures().ahead == 2);
  one.ahead({50}, 8);
  for (const int i : {31, 32}) CHECK(got(one, i, 6) == want(i, 6));
  CHECK(one.read_ahead_figures().ahead == 2);
  CHECK(one.read_ahead_figures().when_read == 2);
}

TEST_CASE("read-ahead: at most its capacity made ahead, the rest read as before, reads from many threads get their own values", "[unit][data]") {
  auto inner = std::make_shared<formula_store>();
  data::read_ahead small(inner, 3, 1, 4);
  std::vector<int> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(i);
  small.ahead(ids, 1);
  for (const int i : ids) CHECK(got(small, i, 1) == want(i, 1));
  CHECK(small.read_ahead_figures().ahead == 4);
  CHECK(small.read_ahead_figures().when_read == 16);
  CHECK(inner->samples_read() == 20);
  // Readers on 4 threads (as model::inputs reads a micro-batch) while the next step is asked for.
  data::read_ahead r(std::make_shared<formula_store>(), 3, 2);
  for (std::int64_t step = 0; step < 20; ++step) {
    r.ahead(ids, step);
    std::atomic<int> wrong{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t)
      readers.emplace_back([&, t] {
        for (int i = t; i < 20; i += 4)
          if (got(r, i, step) != want(i, step)) ++wrong;
      });
    for (auto& t : readers) t.join();
    CHECK(wrong == 0);
  }
  CHECK(r.read_ahead_figures().ahead == 400);  // every read made ahead
}
