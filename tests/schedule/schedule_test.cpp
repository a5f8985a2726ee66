// Generated schedules against golden text and the bubble formula; broken ones are caught.
#include <catch2/catch.hpp>

#include "schedule/schedule.hpp"

using namespace dynapar;
using namespace dynapar::schedule;
using planner::schedule_kind;

TEST_CASE("golden schedules: GPipe and 1F1B on 3 stages, 4 micro-batches", "[unit][schedule]") {
  auto g = generate(schedule_kind::gpipe, 3, 4);
  CHECK(to_text(g.programs[0]) == "L0 F0 SA0 L1 F1 SA1 L2 F2 SA2 L3 F3 SA3 RG3 B3 RG2 B2 RG1 B1 RG0 B0");
  CHECK(to_text(g.programs[2]) == "RA0 F0 RA1 F1 RA2 F2 RA3 F3 B3 SG3 B2 SG2 B1 SG1 B0 SG0");
  auto o = generate(schedule_kind::one_f_one_b, 3, 4);
  CHECK(to_text(o.programs[0]) == "L0 F0 SA0 L1 F1 SA1 L2 F2 SA2 RG0 B0 L3 F3 SA3 RG1 B1 RG2 B2 RG3 B3");
  CHECK(to_text(o.programs[1]) == "RA0 F0 SA0 RA1 F1 SA1 RG0 B0 SG0 RA2 F2 SA2 RG1 B1 SG1 RA3 F3 SA3 RG2 B2 SG2 RG3 B3 SG3");
  CHECK(to_text(o.programs[2]) == "RA0 F0 B0 SG0 RA1 F1 B1 SG1 RA2 F2 B2 SG2 RA3 F3 B3 SG3");
}

TEST_CASE("an evaluation's program: every micro-batch forward only, in order, passed on", "[unit][schedule]") {
  auto e = forward_only(3, 2);
  REQUIRE(e.programs.size() == 3);
  CHECK(to_text(e.programs[0]) == "L0 F0 SA0 L1 F1 SA1");
  CHECK(to_text(e.programs[1]) == "RA0 F0 SA0 RA1 F1 SA1");
  CHECK(to_text(e.programs[2]) == "RA0 F0 RA1 F1");
  CHECK(to_text(forward_only(1, 2).programs[0]) == "L0 F0 L1 F1");
}

TEST_CASE("dry runs match the bubble formula and the activation memory each schedule keeps", "[unit][schedule]") {
  for (int n : {1, 2, 3, 5}) {
    for (int m : {1, 2, 4, 9}) {
      INFO("n=" << n << " m=" << m);
      auto g = validate(generate(schedule_kind::gpipe, n, m));
      REQUIRE(g);
      CHECK(g->makespan == Approx((m + n - 1) * 3.0));
      auto o = validate(generate(schedule_kind::one_f_one_b, n, m));
      REQUIRE(o);
      CHECK(o->makespan == Approx((m + n - 1) * 3.0));
      auto d = validate(generate(schedule_kind::deep_1f1b, n, m));
      REQUIRE(d);  // no deadlock, every micro-batch forwarded and backwarded once
      CHECK(d->makespan == Approx((m + n - 1) * 3.0));  // balanced stages, free links: no gain, no loss
      for (int j = 0; j < n; ++j) {
        CHECK(g->peak_activations[j] == (n == 1 ? 1 : m));  // GPipe keeps every micro-batch
        CHECK(o->peak_activations[j] == std::min(m, n - j)); // 1F1B keeps n - j
        CHECK(d->peak_activations[j] == std::min(m, 2 * (n - j - 1) + 1));  // 1F1B-deep twice the warm-up
      }
    }
  }
}

TEST_CASE("the text form round-trips and rejects what it does not know", "[unit][schedule]") {
  const auto p = generate(schedule_kind::one_f_one_b, 4, 6).programs[1];
  auto back = parse(to_text(p));
  REQUIRE(back);
  CHECK(*back == p);
  CHECK(parse("F0 X1").err().message.find("'X1'") != std::string::npos);
  CHECK_FALSE(parse("F"));
  CHECK_FALSE(parse("Fx"));
}

TEST_CASE("the validator catches deadlocks and lost micro-batches", "[unit][schedule]") {
  auto p = generate(schedule_kind::one_f_one_b, 2, 2);
  // Stage 1 waits for micro-batch 1 first, while stage 0 waits for 0's gradient: a deadlock.
  p.programs[0] = *parse("L0 F0 SA0 RG0 B0 L1 F1 SA1 RG1 B1");
  p.programs[1] = *parse("RA1 F1 B1 SG1 RA0 F0 B0 SG0");
  auto r = validate(p);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == "deadlock");
  CHECK(r.err().message.find("stage 0") != std::string::npos);
  auto q = generate(schedule_kind::gpipe, 2, 3);
  q.programs[1] = *parse("RA0 F0 RA1 F1 B1 SG1 B0 SG0");  // micro-batch 2 never reaches stage 1
  CHECK(validate(q).err().message.find("micro-batch 2") != std::string::npos);
}

#include "schedule/runner.hpp"

TEST_CASE("a stage runner waits on receives until their message arrives", "[unit][schedule]") {
  stage_runner r(*parse("RA0 F0 SA0 RA1 F1 RG0 B0"));
  CHECK(r.next() == nullptr);  // nothing arrived
  CHECK(r.waiting());
  r.arrived_activation(1);     // out of order: still waiting for 0
  CHECK(r.next() == nullptr);
  r.arrived_activation(0);
  for (const char* want : {"RA0", "F0", "SA0", "RA1", "F1"}) {
    REQUIRE(r.next() != nullptr);
    CHECK(to_text({*r.next()}) == want);
    r.done();
  }
  CHECK(r.waiting());
  r.arrived_gradient(0);
  REQUIRE(r.next());
  r.done();
  REQUIRE(r.next());
  CHECK(r.next()->kind == op::backward);
  r.done();
  CHECK(r.finished());
}
