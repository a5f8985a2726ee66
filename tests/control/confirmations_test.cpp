// The holders' confirmations of an apply phase: another attempt's or a repeated one does not
// count, and what is missing is exactly the holders still in the run that did not confirm.
#include <catch2/catch.hpp>

#include "control/confirmations.hpp"

using dynapar::control::apply_confirmations;

TEST_CASE("a step counts as applied only by the confirmations of its own attempt", "[unit][control]") {
  // Layer 0 on devices 1 and 2, layer 1 on device 2, layer 2 on devices 3 and 4.
  const std::map<int, std::vector<int>> holders = {{0, {1, 2}}, {1, {2}}, {2, {3, 4}}};
  const auto everyone = [](int) { return true; };
  apply_confirmations c;
  c.begin(7);
  CHECK(c.missing(holders, everyone) == std::set<int>{1, 2, 3, 4});
  CHECK_FALSE(c.confirm(1, 6, 0));  // an abandoned attempt's
  CHECK(c.confirm(1, 7, 0));
  CHECK_FALSE(c.confirm(1, 7, 0));  // once
  CHECK(c.confirm(2, 7, 0));
  CHECK(c.confirm(3, 7, 2));
  CHECK(c.confirm(4, 7, 2));
  // Device 2 confirmed layer 0 but not layer 1: it still owes one.
  CHECK(c.missing(holders, everyone) == std::set<int>{2});
  // A device no longer in the run owes nothing.
  CHECK(c.missing(holders, [](int id) { return id != 2; }).empty());
  CHECK(c.confirm(2, 7, 1));
  CHECK(c.missing(holders, everyone).empty());
  // The next attempt starts from nothing.
  c.begin(8);
  CHECK(c.missing(holders, everyone) == std::set<int>{1, 2, 3, 4});
  CHECK_FALSE(c.confirm(2, 7, 1));
}

TEST_CASE("a confirmation of a bucket covers each of its layers, and only those", "[unit][control]") {
  // Layers 0, 1 and 3 on devices 1 and 2 were summed as one bucket (named by layer 0);
  // layer 2 on device 2 alone.
  const std::map<int, std::vector<int>> holders = {{0, {1, 2}}, {1, {1, 2}}, {2, {2}}, {3, {1, 2}}};
  const auto everyone = [](int) { return true; };
  apply_confirmations c;
  c.begin(3, {{0, {0, 1, 3}}});
  CHECK(c.confirm(1, 3, 0));
  CHECK_FALSE(c.confirm(1, 3, 0));  // once
  CHECK(c.missing(holders, everyone) == std::set<int>{2});
  CHECK(c.confirm(2, 3, 0));
  CHECK(c.missing(holders, everyone) == std::set<int>{2});  // layer 2 is not in the bucket
  CHECK(c.confirm(2, 3, 2));
  CHECK(c.missing(holders, everyone).empty());
  // The next attempt, without buckets: layer 0's confirmation is layer 0's alone.
  c.begin(4);
  CHECK(c.confirm(1, 4, 0));
  CHECK(c.confirm(2, 4, 0));
  CHECK(c.missing(holders, everyone) == std::set<int>{1, 2});
}
