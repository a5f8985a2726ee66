// Every device operation survives encode -> decode with each of its fields, and a call whose
// fields contradict each other or its tensor frames is refused, naming the field.
#include <catch2/catch.hpp>

#include <cmath>

#include "wire/codec.hpp"

using namespace dynapar;
using namespace dynapar::wire;

namespace {

// `n` tensors of one float each: only their count matters to the checks.
std::vector<tensor_meta> metas(std::size_t n) { return std::vector<tensor_meta>(n, tensor_meta{0, {1}}); }

result<device_call> through_wire(device_op op, std::size_t tensors = 0) {
  device_call c;
  c.id = 77;
  c.device = 4;
  c.op = std::move(op);
  c.tensors = metas(tensors);
  const auto bytes = encode(envelope{protocol_version, "node-a", 1, c});
  auto back = decode(bytes.data(), bytes.size());
  if (!back) return back.err();
  return std::get<device_call>(back->msg);
}

template <class T>
T round_trip(T op, std::size_t tensors = 0) {
  auto c = through_wire(op, tensors);
  INFO((c ? std::string("ok") : c.err().message));
  REQUIRE(c);
  CHECK(c->id == 77);
  CHECK(c->device == 4);
  CHECK(c->tensors.size() == tensors);
  REQUIRE(std::holds_alternative<T>(c->op));
  return std::get<T>(c->op);
}

std::string refusal(device_op op, std::size_t tensors = 0) {
  auto c = through_wire(std::move(op), tensors);
  return c ? "" : c.err().message;
}

}  // namespace

TEST_CASE("every device operation round-trips with its fields", "[unit][wire]") {
  round_trip(ops::ack{});
  round_trip(ops::probe{});
  round_trip(ops::retire{});
  CHECK(round_trip(ops::error{"out of memory"}).why == "out of memory");
  CHECK(round_trip(ops::drop{5}).layer == 5);
  CHECK(round_trip(ops::hash{6}).layer == 6);
  CHECK(round_trip(ops::copy{7}).layer == 7);
  CHECK(round_trip(ops::copy_lean{9}).layer == 9);
  CHECK(round_trip(ops::perturb{8}).layer == 8);
  CHECK(round_trip(ops::speed{0.25}).factor == 0.25);
  CHECK(round_trip(ops::probed{0.125}).seconds == 0.125);
  CHECK(round_trip(ops::hashed{0xfedcba9876543210ull}).value == 0xfedcba9876543210ull);
  CHECK(round_trip(ops::memory{3e9}).bytes == 3e9);
  CHECK(round_trip(ops::fail{250000}).after_us == 250000);

  const auto h = round_trip(ops::hold{3, 1, 2, 123456, {2, 0, 1}}, 4);
  CHECK((h.layer == 3 && h.from == 1 && h.to == 2 && h.bytes == 123456));
  CHECK((h.layout == std::vector<std::int64_t>{2, 0, 1} && h.built == 0));
  ops::hold fresh{3, -1, 2, 0, {}};
  fresh.built = 0x0123456789abcdefull;
  CHECK(round_trip(fresh, 0).built == 0x0123456789abcdefull);
  ops::hold lean{3, 1, -1, 0, {1, 0}};
  lean.state_hash = 0xfedcba9876543211ull;
  CHECK(round_trip(lean, 2).state_hash == 0xfedcba9876543211ull);
  const std::string sha(64, 'c');
  ops::hold from_shard{5, -1, 2, 0, {}};
  from_shard.shard = "/ck/step-8/layer-5.pt";
  from_shard.shard_sha256 = sha;
  const auto fs = round_trip(from_shard, 0);
  CHECK((fs.shard == "/ck/step-8/layer-5.pt" && fs.shard_sha256 == sha && fs.from == -1));
  const auto saving = round_trip(ops::save_shard{5, ".step-8.tmp/layer-5.pt"});
  CHECK((saving.layer == 5 && saving.path == ".step-8.tmp/layer-5.pt"));
  const auto sv = round_trip(ops::shard_saved{sha, 4096, ""});
  CHECK((sv.sha256 == sha && sv.bytes == 4096 && sv.error.empty()));
  CHECK(round_trip(ops::shard_saved{"", 0, "cannot write: File too large"}).error == "cannot write: File too large");
  const auto mi = round_trip(ops::migrate{4, 9, {1.5e9, 2e-4}});
  CHECK((mi.layer == 4 && mi.to == 9 && mi.path.bandwidth == 1.5e9 && mi.path.latency == 2e-4));
  const auto ex = round_trip(ops::expect{4, 2});
  CHECK((ex.layer == 4 && ex.from == 2));
  const auto mo = round_trip(ops::moved{4, 2, 9, 0, "device 9 is out of memory"});
  CHECK((mo.layer == 4 && mo.from == 2 && mo.to == 9 && mo.refused == "device 9 is out of memory"));

  ops::step st;
  st.tag = 41;
  st.lo = 2;
  st.hi = 5;
  st.prev = 1;
  st.next = -1;
  st.inputs = 0;
  st.targets = 3;
  st.first_micro = 12;
  st.train_step = 7001;
  st.accumulate = true;
  st.program = {{4, 0}, {1, 0}, {6, 1}, {2, 1}};
  st.to_prev = {1e8, 1e-3};
  const auto sb = round_trip(st, 3);
  CHECK((sb.tag == 41 && sb.lo == 2 && sb.hi == 5 && sb.prev == 1 && sb.next == -1));
  CHECK((sb.inputs == 0 && sb.targets == 3 && sb.first_micro == 12 && sb.train_step == 7001 && sb.accumulate));
  REQUIRE(sb.program.size() == 4);
  CHECK((sb.program[0].kind == 4 && sb.program[2].kind == 6 && sb.program[2].micro == 1 && sb.program[3].kind == 2));
  CHECK((!sb.more && !sb.resume));
  st.more = true;  // within-step dispatch: a probe, then its rest
  CHECK((round_trip(st, 3).more && !round_trip(st, 3).resume));
  st.more = false;
  st.resume = true;
  CHECK((!round_trip(st, 3).more && round_trip(st, 3).resume));
  st.resume = false;
  CHECK((sb.to_prev.bandwidth == 1e8 && sb.to_prev.latency == 1e-3 && sb.to_next.bandwidth == 0));
  CHECK((sb.samples.empty() && !sb.inputs_from_samples && !sb.targets_from_samples));
  st.targets = 0;  // the node builds them from these ids
  st.samples = {{5, 9, 0}, {59999}};
  st.targets_from_samples = true;
  const auto ss = round_trip(st, 0);
  CHECK((ss.samples == std::vector<std::vector<int>>{{5, 9, 0}, {59999}} && ss.targets_from_samples && !ss.inputs_from_samples));
  CHECK(ss.ahead.empty());
  st.ahead = {17, 0, 59998};  // the next step's samples at this place, decoded meanwhile
  CHECK(round_trip(st, 0).ahead == std::vector<int>{17, 0, 59998});

  const auto ab = round_trip(ops::activation{41, 3, 7}, 1);
  CHECK((ab.tag == 41 && ab.micro == 3 && ab.from == 7));
  const auto gb = round_trip(ops::gradient{42, 6, 8}, 1);
  CHECK((gb.tag == 42 && gb.micro == 6 && gb.from == 8));

  const auto rb = round_trip(ops::stage_report{{3, 0.5, 0.25, 16, {{3, 4, 1e6, 0.01, 8}}, 0, 9.75, 0}, 41, "lost", 0});
  CHECK((rb.device == 3 && rb.tag == 41 && rb.messages == 16 && rb.compute_s == 0.5 && rb.wait_s == 0.25 && rb.loss_sum == 9.75));
  REQUIRE(rb.links.size() == 1);
  CHECK((rb.links[0].from == 3 && rb.links[0].to == 4 && rb.links[0].transfers == 8 && rb.links[0].bytes == 1e6 &&
         rb.links[0].busy_s == 0.01));
  CHECK(rb.error == "lost");
  CHECK(rb.interim == 0);
  CHECK(round_trip(ops::stage_report{{3, 0.5, 0, 0, {}, 0, 0, 0}, 41, "", 2}).interim == 2);  // a probe ended
  CHECK(round_trip(ops::stage_report{{3, 0.5, 0, 0, {}, 0.125, 0, 0}, 41, "", 0}).idle_s == 0.125);  // waited on the controller
  CHECK(rb.idle_s == 0);

  const auto gs = round_trip(ops::gradients{41, {0, 2, 5}});
  CHECK((gs.tag == 41 && gs.layers == std::vector<int>{0, 2, 5}));
  const auto set = round_trip(ops::gradient_set{3, 41, {{0, 2, {{2, 1}, {0, 12}}}, {5, 1, {{3, 0}}}}}, 5);
  CHECK((set.device == 3 && set.tag == 41));
  REQUIRE(set.layers.size() == 2);
  CHECK((set.layers[0].layer == 0 && set.layers[0].tensors_per_part == 2 && set.layers[0].parts.size() == 2));
  CHECK((set.layers[0].parts[1].level == 0 && set.layers[0].parts[1].index == 12 && set.layers[1].parts[0].level == 3));

  const auto ap = round_trip(ops::apply{41, 2, 256, 0.5}, 2);
  CHECK((ap.tag == 41 && ap.layer == 2 && ap.divisor == 256 && ap.scale == 0.5));
  const auto pa = round_trip(ops::pause{1000, true, 2.5});
  CHECK((pa.after_us == 1000 && pa.cut_off && pa.seconds == 2.5));
  const auto ti = round_trip(ops::timing{{{1e-3, 2e-3, 3e-4, 4e-5}, {5e-3, 6e-3, 0, 0}}});
  REQUIRE(ti.layers.size() == 2);
  CHECK((ti.layers[0].forward_s == 1e-3 && ti.layers[0].backward_s == 2e-3 && ti.layers[0].fixed_s == 3e-4 &&
         ti.layers[0].update_s == 4e-5 && ti.layers[1].forward_s == 5e-3));
  const auto re = round_trip(ops::reduce{41, 2, 32, false, {5, 0, 3}, "", 0, {}});
  CHECK((re.tag == 41 && re.layer == 2 && re.micro_batches == 32 && !re.exact && re.holders == std::vector<int>{5, 0, 3}));
  CHECK((re.store.empty() && re.generation == 0 && re.layers.empty()));
  const auto rk = round_trip(ops::reduce{41, 2, 32, true, {5, 0}, "", 0, {2, 3, 7}});
  CHECK(rk.layers == std::vector<int>{2, 3, 7});
  const auto rg = round_trip(ops::reduce{41, 2, 32, false, {5, 0}, "10.0.0.7:29500", 9, {}});
  CHECK((rg.store == "10.0.0.7:29500" && rg.generation == 9));
  const auto sh = round_trip(ops::sum_held{41, 2, 65536, {}});
  CHECK((sh.tag == 41 && sh.layer == 2 && sh.bytes_in == 65536 && sh.norms.empty()));
  const std::vector<std::vector<float>> norms{{0.5f, 3.25f}, {}, {1e-7f}};
  CHECK(round_trip(ops::sum_held{41, 2, 0, norms}).norms == norms);  // clipping: a list a bucket layer
  CHECK(round_trip(ops::reduce{41, 2, 32, true, {5, 0}, "", 0, {}, 128}).norms_divisor == 128);
  const auto rp = round_trip(ops::reduce_part{41, 2, true, 1, {{1, 3}, {0, 8}}, 7}, 2);
  CHECK((rp.tag == 41 && rp.layer == 2 && rp.gather && rp.from == 1 && rp.parts.size() == 2 && rp.parts[0].index == 3 && rp.device == 7));
  const auto co = round_trip(ops::commit{41, 2, 64, 0.125});
  CHECK((co.tag == 41 && co.layer == 2 && co.divisor == 64 && co.scale == 0.125));
}

TEST_CASE("malformed device operations are refused, each naming what is wrong", "[unit][wire]") {
  ops::step st;
  st.hi = 2;
  st.inputs = 1;
  st.targets = 1;
  REQUIRE(refusal(st, 2).empty());
  // One input and one target announced, one tensor carried.
  CHECK(refusal(st, 1).find("input and target counts") != std::string::npos);
  auto unknown = st;
  unknown.program = {{99, 0}};
  CHECK(refusal(unknown, 2).find("unknown instruction") != std::string::npos);
  unknown.program = {{7, 0}};  // protocol 20's reduce_grads, gone in 21
  CHECK(refusal(unknown, 2).find("unknown instruction") != std::string::npos);
  unknown.program = {{1, -1}};  // every instruction names its micro-batch
  CHECK(refusal(unknown, 2).find("negative micro-batch") != std::string::npos);
  auto both = st;
  both.more = both.resume = true;
  CHECK(refusal(both, 2).find("both a probe (more) and a probe's rest (resume)") != std::string::npos);
  auto negative = st;
  negative.first_micro = -1;  // travels unsigned: beyond any step's micro-batches
  CHECK(refusal(negative, 2).find("call.step.firstMicro") != std::string::npos);
  auto empty = st;
  empty.hi = 0;
  CHECK(refusal(empty, 2).find("call.step.endLayer") != std::string::npos);
  auto endless = st;
  endless.to_next.latency = std::nan("");
  CHECK(refusal(endless, 2).find("call.step.toNext") != std::string::npos);
  auto by_ids = st;
  by_ids.inputs = 0;
  by_ids.inputs_from_samples = true;
  CHECK(refusal(by_ids, 1).find("must list each micro-batch's samples") != std::string::npos);
  by_ids.samples = {{3, -2}};
  CHECK(refusal(by_ids, 1).find("sample id below 0 (-2)") != std::string::npos);
  by_ids.samples = {{3}, {}};
  CHECK(refusal(by_ids, 1).find("a micro-batch without samples") != std::string::npos);
  by_ids.samples = {{3}, {4}};
  CHECK(refusal(by_ids, 1).empty());
  by_ids.ahead = {2, -7};
  CHECK(refusal(by_ids, 1).find("call.step.aheadSamples has a sample id below 0 (-7)") != std::string::npos);

  // Gradients claiming more tensors than came; a partial sum's place outside the tree.
  CHECK(refusal(ops::gradient_set{0, 7, {{0, 3, {{0, 0}, {0, 1}}}}}, 1).find("counts 6 tensors") != std::string::npos);
  CHECK(refusal(ops::gradient_set{0, 7, {{0, 1, {{63, 0}}}}}, 1).find("outside the tree") != std::string::npos);
  CHECK(refusal(ops::reduce_part{0, 0, false, 0, {{0, std::int64_t{1} << 41}}, 0}, 1).find("outside the tree") != std::string::npos);
  CHECK(refusal(ops::reduce_part{0, 0, false, 0, {{0, 0}, {0, 1}}, 0}, 1).find("call.reducePart") != std::string::npos);
  CHECK(refusal(ops::reduce_part{0, 0, false, 0, {{0, 0}}}, 1).find("call.reducePart.device") != std::string::npos);

  CHECK(refusal(ops::activation{0, 0, 1}, 2).find("call.activation") != std::string::npos);
  CHECK(refusal(ops::activation{0, 0}, 1).find("call.activation.from") != std::string::npos);  // no sender named
  CHECK(refusal(ops::gradient{0, 0}, 1).find("call.gradient.from") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 0, 4, true, {1, 2, 1}, "", 0, {}}).find("names device 1 twice") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 0, 4, true, {}, "", 0, {}}).find("call.reduce.holders") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 0, 0, true, {1}, "", 0, {}}).find("call.reduce.microBatches") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 0, 4, true, {1}, "127.0.0.1:1", 0, {}}).find("only for exact: false") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 0, 4, false, {1}, "localhost", 0, {}}).find("HOST:PORT") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 2, 4, true, {1}, "", 0, {1, 2}}).find("must begin with call.reduce.layer") != std::string::npos);
  CHECK(refusal(ops::reduce{0, 2, 4, true, {1}, "", 0, {2, 5, 5}}).find("ascending") != std::string::npos);
  CHECK(refusal(ops::apply{0, 0, 0}).find("call.apply.divisor") != std::string::npos);
  for (double s : {0.0, 1.5, std::nan("")}) {  // clipping only shrinks a gradient
    CHECK(refusal(ops::apply{0, 0, 8, s}).find("call.apply.scale") != std::string::npos);
    CHECK(refusal(ops::commit{0, 0, 8, s}).find("call.commit.scale") != std::string::npos);
  }
  CHECK(refusal(ops::reduce{0, 0, 4, true, {1}, "", 0, {}, -1}).find("call.reduce.normsDivisor") != std::string::npos);
  CHECK(refusal(ops::commit{0, 0, std::nan("")}).find("call.commit.divisor") != std::string::npos);
  CHECK(refusal(ops::speed{0}).find("call.speed") != std::string::npos);
  CHECK(refusal(ops::pause{0, false, 1e9}).find("call.pause.seconds") != std::string::npos);
  CHECK(refusal(ops::pause{4'000'000'000ull, false, 1}).find("call.pause.afterUs") != std::string::npos);
  CHECK(refusal(ops::fail{4'000'000'000ull}).find("call.fail") != std::string::npos);
  CHECK(refusal(ops::timing{{{-1, 0, 0, 0}}}).find("call.timing") != std::string::npos);
  CHECK(refusal(ops::hold{-5, -1, 0, 0, {}}).find("call.hold.layer") != std::string::npos);  // travels unsigned
  ops::hold built_migrating{0, 1, 2, 0, {}};  // a layer built by the node is never a migration
  built_migrating.built = 7;
  CHECK(refusal(built_migrating).find("call.hold.built") != std::string::npos);
  ops::hold built_with_layout{0, -1, 2, 0, {1}};
  built_with_layout.built = 7;
  CHECK(refusal(built_with_layout).find("call.hold.built") != std::string::npos);
  ops::hold shard_migrating{0, 1, 2, 0, {}};  // a layer read from a shard is placed, never migrating
  shard_migrating.shard = "/ck/step-8/layer-0.pt";
  shard_migrating.shard_sha256 = std::string(64, 'a');
  CHECK(refusal(shard_migrating).find("call.hold.shard") != std::string::npos);
  ops::hold shard_without_hash{0, -1, 2, 0, {}};
  shard_without_hash.shard = "/ck/step-8/layer-0.pt";
  shard_without_hash.shard_sha256 = "ABC";
  CHECK(refusal(shard_without_hash).find("call.hold.shard") != std::string::npos);
  // A shard's name in the node's own directory, never a path of the controller's choosing.
  CHECK(refusal(ops::save_shard{0, "/ck/step-8/layer-0.pt"}).find("call.saveShard.path") != std::string::npos);
  CHECK(refusal(ops::save_shard{0, "../../etc/layer-0.pt"}).find("call.saveShard.path") != std::string::npos);
  CHECK(refusal(ops::shard_saved{"", 10, ""}).find("call.shardSaved.sha256") != std::string::npos);
  CHECK(refusal(ops::migrate{0, 1, {-1, 0}}).find("call.migrate.link") != std::string::npos);
  CHECK(refusal(ops::expect{0, -1}).find("call.expect.from") != std::string::npos);
  CHECK(refusal(ops::stage_report{{0, -1, 0, 0, {}, 0, 0, 0}, 0, "", 0}).find("call.stageReport") != std::string::npos);
  CHECK(refusal(ops::stage_report{{0, 0, 0, 0, {}, 0, 0, 0}, 0, "", 3}).find("call.stageReport.interim") != std::string::npos);
  CHECK(refusal(ops::stage_report{{0, 0, 0, 0, {}, -1, 0, 0}, 0, "", 0}).find("call.stageReport") != std::string::npos);
  CHECK(refusal(ops::stage_report{{0, 0, 0, 0, {}, std::nan(""), 0, 0}, 0, "", 0}).find("call.stageReport") != std::string::npos);
}
