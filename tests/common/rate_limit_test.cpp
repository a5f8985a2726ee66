// The limiter for messages from peers a controller does not know (common/rate_limit.hpp),
// against counts worked out by hand.
#include <catch2/catch.hpp>

#include "common/rate_limit.hpp"

using namespace dynapar;

namespace {
int allowed(rate_limit& r, const std::string& key, int tries, double now_s) {
  int n = 0;
  for (int i = 0; i < tries; ++i) n += r.allow(key, now_s) ? 1 : 0;
  return n;
}
}  // namespace

TEST_CASE("a key sends its burst, then its rate, time that goes back adds nothing", "[unit][common]") {
  rate_limit r({10, 4, 1000, 1000, 16});
  CHECK(allowed(r, "a", 10, 100.0) == 4);  // the burst
  CHECK(r.refused() == 6);
  CHECK(allowed(r, "a", 10, 100.5) == 4);  // 0.5 s x 10/s = 5 tokens, capped at the burst 4
  CHECK(allowed(r, "a", 10, 100.625) == 1);  // 0.125 s x 10/s = 1.25
  CHECK(allowed(r, "a", 10, 50.0) == 0);   // an earlier time refills nothing
  CHECK(allowed(r, "b", 10, 100.625) == 4);  // another key has its own bucket
}

TEST_CASE("all keys together are held to the shared rate: fresh identities do not add up", "[unit][common]") {
  rate_limit r({10, 4, 5, 6, 1000});
  int n = 0;
  for (int k = 0; k < 20; ++k) n += allowed(r, "node-" + std::to_string(k), 1, 0.0);
  CHECK(n == 6);  // the shared burst
  CHECK(r.refused() == 14);
  n = 0;
  for (int k = 20; k < 40; ++k) n += allowed(r, "node-" + std::to_string(k), 1, 1.0);
  CHECK(n == 5);  // one second of the shared rate
}

TEST_CASE("the table of keys stays bounded: past max_keys it is forgotten", "[unit][common]") {
  rate_limit r({1, 2, 1000, 1000, 3});
  CHECK(allowed(r, "a", 5, 0) == 2);
  CHECK(allowed(r, "b", 5, 0) == 2);
  CHECK(allowed(r, "c", 5, 0) == 2);
  CHECK(allowed(r, "a", 5, 0) == 0);  // still tracked: no new tokens
  CHECK(allowed(r, "d", 5, 0) == 2);  // a fourth key: the table was cleared first
  CHECK(allowed(r, "a", 5, 0) == 2);  // so "a" starts afresh; the shared bucket is what bounds this
}
