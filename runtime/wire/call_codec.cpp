// DeviceCall <-> wire::device_call: one struct per operation. Reading turns every unsigned
// field into the plain value's type with a range check; validate_call does the rest.
#include <string>

#include "common/overloaded.hpp"
#include "wire/capnp_fields.hpp"

namespace dynapar::wire {
namespace {

using U32 = std::uint32_t;
using U64 = std::uint64_t;

template <class B, class V>
void set_ints(B list, const std::vector<V>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) list.set(static_cast<unsigned>(i), v[i]);
}

void set_link(schema::Link::Builder b, const ops::link& l) {
  b.setBandwidth(l.bandwidth);
  b.setLatency(l.latency);
}
ops::link read_link(schema::Link::Reader r) { return {r.getBandwidth(), r.getLatency()}; }

void set_places(capnp::List<schema::TreePlace>::Builder b, const std::vector<ops::tree_place>& v) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    b[static_cast<unsigned>(i)].setLevel(static_cast<std::uint8_t>(v[i].level));
    b[static_cast<unsigned>(i)].setIndex(static_cast<U64>(v[i].index));
  }
}
std::vector<ops::tree_place> read_places(capnp::List<schema::TreePlace>::Reader r, const decode_limits& lim, const std::string& field) {
  check_list(r, lim, field);
  std::vector<ops::tree_place> out;
  for (auto p : r) out.push_back({p.getLevel(), to_int64(p.getIndex(), field + ".index")});
  return out;
}

template <class T>
unsigned n(const std::vector<T>& v) {
  return static_cast<unsigned>(v.size());
}

}  // namespace

void write_call(schema::DeviceCall::Builder c, const device_call& m) {
  c.setId(m.id);
  c.setDevice(m.device);
  auto ts = c.initTensors(n(m.tensors));
  for (std::size_t i = 0; i < m.tensors.size(); ++i) {
    ts[static_cast<unsigned>(i)].setDtype(m.tensors[i].dtype);
    set_ints(ts[static_cast<unsigned>(i)].initShape(n(m.tensors[i].shape)), m.tensors[i].shape);
    if (!m.tensors[i].strides.empty()) set_ints(ts[static_cast<unsigned>(i)].initStrides(n(m.tensors[i].strides)), m.tensors[i].strides);
  }
  auto o = c.initOp();
  std::visit(overloaded{
                 [&](const ops::ack&) { o.setAck(); },
                 [&](const ops::error& e) { o.setError(e.why); },
                 [&](const ops::hold& h) {
                   auto b = o.initHold();
                   b.setLayer(static_cast<U32>(h.layer));
                   b.setFrom(h.from);
                   b.setTo(h.to);
                   b.setBytes(h.bytes);
                   set_ints(b.initLayout(n(h.layout)), h.layout);
                   b.setBuilt(h.built);
                   b.setStateHash(h.state_hash);
                   b.setShard(h.shard);
                   b.setShardSha256(h.shard_sha256);
                 },
                 [&](const ops::migrate& x) {
                   auto b = o.initMigrate();
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setTo(x.to);
                   set_link(b.initLink(), x.path);
                 },
                 [&](const ops::expect& x) {
                   auto b = o.initExpect();
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setFrom(x.from);
                 },
                 [&](const ops::moved& x) {
                   auto b = o.initMoved();
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setFrom(x.from);
                   b.setTo(x.to);
                   b.setBytes(x.bytes);
                   b.setRefused(x.refused);
                 },
                 [&](const ops::drop& x) { o.setDrop(static_cast<U32>(x.layer)); },
                 [&](const ops::speed& x) { o.setSpeed(x.factor); },
                 [&](const ops::probe&) { o.setProbe(); },
                 [&](const ops::probed& x) { o.setProbed(x.seconds); },
                 [&](const ops::step& x) {
                   auto b = o.initStep();
                   b.setTag(x.tag);
                   b.setFirstLayer(static_cast<U32>(x.lo));
                   b.setEndLayer(static_cast<U32>(x.hi));
                   b.setPrev(x.prev);
                   b.setNext(x.next);
                   b.setInputs(static_cast<U32>(x.inputs));
                   b.setTargets(static_cast<U32>(x.targets));
                   b.setFirstMicro(static_cast<U64>(x.first_micro));
                   b.setTrainStep(x.train_step);
                   b.setAccumulate(x.accumulate);
                   auto prog = b.initProgram(n(x.program));
                   for (std::size_t i = 0; i < x.program.size(); ++i) {
                     prog[static_cast<unsigned>(i)].setKind(static_cast<schema::StageOp>(x.program[i].kind));
                     prog[static_cast<unsigned>(i)].setMicro(x.program[i].micro);
                   }
                   set_link(b.initToPrev(), x.to_prev);
                   set_link(b.initToNext(), x.to_next);
                   auto smp = b.initSamples(n(x.samples));
                   for (std::size_t i = 0; i < x.samples.size(); ++i) {
                     auto ids = smp.init(static_cast<unsigned>(i), n(x.samples[i]));
                     for (std::size_t k = 0; k < x.samples[i].size(); ++k) ids.set(static_cast<unsigned>(k), x.samples[i][k]);
                   }
                   b.setInputsFromSamples(x.inputs_from_samples);
                   b.setTargetsFromSamples(x.targets_from_samples);
                   b.setMore(x.more);
                   b.setResume(x.resume);
                   b.setEvaluate(x.evaluate);
                   auto ahead = b.initAheadSamples(n(x.ahead));
                   for (std::size_t k = 0; k < x.ahead.size(); ++k) ahead.set(static_cast<unsigned>(k), x.ahead[k]);
                 },
                 [&](const ops::activation& x) {
                   auto b = o.initActivation();
                   b.setTag(x.tag);
                   b.setMicro(static_cast<U32>(x.micro));
                   b.setFrom(x.from);
                 },
                 [&](const ops::gradient& x) {
                   auto b = o.initGradient();
                   b.setTag(x.tag);
                   b.setMicro(static_cast<U32>(x.micro));
                   b.setFrom(x.from);
                 },
                 [&](const ops::stage_report& x) {
                   auto b = o.initStageReport();
                   b.setDevice(x.device);
                   b.setTag(x.tag);
                   b.setMessages(static_cast<U32>(x.messages));
                   b.setComputeS(x.compute_s);
                   b.setWaitS(x.wait_s);
                   b.setLossSum(x.loss_sum);
                   b.setInterim(static_cast<std::uint8_t>(x.interim));
                   b.setIdleS(x.idle_s);
                   auto ls = b.initLinks(n(x.links));
                   for (std::size_t i = 0; i < x.links.size(); ++i) {
                     auto l = ls[static_cast<unsigned>(i)];
                     l.setFrom(x.links[i].from);
                     l.setTo(x.links[i].to);
                     l.setTransfers(static_cast<U32>(x.links[i].transfers));
                     l.setBytes(x.links[i].bytes);
                     l.setBusyS(x.links[i].busy_s);
                   }
                   b.setError(x.error);
                 },
                 [&](const ops::gradients& x) {
                   auto b = o.initGradients();
                   b.setTag(x.tag);
                   auto ls = b.initLayers(n(x.layers));
                   for (std::size_t i = 0; i < x.layers.size(); ++i) ls.set(static_cast<unsigned>(i), static_cast<U32>(x.layers[i]));
                 },
                 [&](const ops::gradient_set& x) {
                   auto b = o.initGradientSet();
                   b.setDevice(x.device);
                   b.setTag(x.tag);
                   auto ls = b.initLayers(n(x.layers));
                   for (std::size_t i = 0; i < x.layers.size(); ++i) {
                     auto l = ls[static_cast<unsigned>(i)];
                     l.setLayer(static_cast<U32>(x.layers[i].layer));
                     l.setTensorsPerPart(static_cast<U32>(x.layers[i].tensors_per_part));
                     set_places(l.initParts(n(x.layers[i].parts)), x.layers[i].parts);
                   }
                 },
                 [&](const ops::apply& x) {
                   auto b = o.initApply();
                   b.setTag(x.tag);
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setDivisor(x.divisor);
                   b.setScale(x.scale);
                 },
                 [&](const ops::hash& x) { o.setHash(static_cast<U32>(x.layer)); },
                 [&](const ops::hashed& x) { o.setHashed(x.value); },
                 [&](const ops::copy& x) { o.setCopy(static_cast<U32>(x.layer)); },
                 [&](const ops::copy_lean& x) { o.setCopyLean(static_cast<U32>(x.layer)); },
                 [&](const ops::save_shard& x) {
                   auto b = o.initSaveShard();
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setPath(x.path);
                 },
                 [&](const ops::shard_saved& x) {
                   auto b = o.initShardSaved();
                   b.setSha256(x.sha256);
                   b.setBytes(x.bytes);
                   b.setError(x.error);
                 },
                 [&](const ops::perturb& x) { o.setPerturb(static_cast<U32>(x.layer)); },
                 [&](const ops::retire&) { o.setRetire(); },
                 [&](const ops::fail& x) { o.setFail(x.after_us); },
                 [&](const ops::pause& x) {
                   auto b = o.initPause();
                   b.setAfterUs(x.after_us);
                   b.setCutOff(x.cut_off);
                   b.setSeconds(x.seconds);
                 },
                 [&](const ops::memory& x) { o.setMemory(x.bytes); },
                 [&](const ops::timing& x) {
                   auto ls = o.initTiming(n(x.layers));
                   for (std::size_t i = 0; i < x.layers.size(); ++i) {
                     auto l = ls[static_cast<unsigned>(i)];
                     l.setForwardS(x.layers[i].forward_s);
                     l.setBackwardS(x.layers[i].backward_s);
                     l.setFixedS(x.layers[i].fixed_s);
                     l.setUpdateS(x.layers[i].update_s);
                   }
                 },
                 [&](const ops::reduce& x) {
                   auto b = o.initReduce();
                   b.setTag(x.tag);
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setMicroBatches(static_cast<U64>(x.micro_batches));
                   b.setExact(x.exact);
                   set_ints(b.initHolders(n(x.holders)), x.holders);
                   b.setStore(x.store);
                   b.setGeneration(static_cast<U64>(x.generation));
                   set_ints(b.initLayers(n(x.layers)), x.layers);
                   b.setNormsDivisor(x.norms_divisor);
                 },
                 [&](const ops::sum_held& x) {
                   auto b = o.initSumHeld();
                   b.setTag(x.tag);
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setBytesIn(static_cast<U64>(x.bytes_in));
                   auto ls = b.initNorms(n(x.norms));
                   for (std::size_t i = 0; i < x.norms.size(); ++i) {
                     auto l = ls.init(static_cast<unsigned>(i), n(x.norms[i]));
                     for (std::size_t k = 0; k < x.norms[i].size(); ++k) l.set(static_cast<unsigned>(k), x.norms[i][k]);
                   }
                 },
                 [&](const ops::reduce_part& x) {
                   auto b = o.initReducePart();
                   b.setTag(x.tag);
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setGather(x.gather);
                   b.setFrom(static_cast<U32>(x.from));
                   set_places(b.initParts(n(x.parts)), x.parts);
                   b.setDevice(x.device);
                 },
                 [&](const ops::commit& x) {
                   auto b = o.initCommit();
                   b.setTag(x.tag);
                   b.setLayer(static_cast<U32>(x.layer));
                   b.setDivisor(x.divisor);
                   b.setScale(x.scale);
                 },
             },
             m.op);
}

namespace {

using Op = schema::DeviceCall::Op;

device_op read_op(Op::Reader o, const decode_limits& lim) {
  switch (o.which()) {
    case Op::ACK: return ops::ack{};
    case Op::ERROR: return ops::error{text(o.getError(), lim, "call.error")};
    case Op::HOLD: {
      auto r = o.getHold();
      ops::hold h{to_int(r.getLayer(), "call.hold.layer"), r.getFrom(), r.getTo(), r.getBytes(), {}};
      check_list(r.getLayout(), lim, "call.hold.layout");
      for (auto v : r.getLayout()) h.layout.push_back(v);
      h.built = r.getBuilt();
      h.state_hash = r.getStateHash();
      h.shard = text(r.getShard(), lim, "call.hold.shard");
      h.shard_sha256 = text(r.getShardSha256(), lim, "call.hold.shardSha256");
      return h;
    }
    case Op::MIGRATE: {
      auto r = o.getMigrate();
      return ops::migrate{to_int(r.getLayer(), "call.migrate.layer"), r.getTo(), read_link(r.getLink())};
    }
    case Op::EXPECT: return ops::expect{to_int(o.getExpect().getLayer(), "call.expect.layer"), o.getExpect().getFrom()};
    case Op::MOVED: {
      auto r = o.getMoved();
      return ops::moved{to_int(r.getLayer(), "call.moved.layer"), r.getFrom(), r.getTo(), r.getBytes(),
                        text(r.getRefused(), lim, "call.moved.refused")};
    }
    case Op::DROP: return ops::drop{to_int(o.getDrop(), "call.drop")};
    case Op::SPEED: return ops::speed{o.getSpeed()};
    case Op::PROBE: return ops::probe{};
    case Op::PROBED: return ops::probed{o.getProbed()};
    case Op::STEP: {
      auto r = o.getStep();
      ops::step s;
      s.tag = r.getTag();
      s.lo = to_int(r.getFirstLayer(), "call.step.firstLayer");
      s.hi = to_int(r.getEndLayer(), "call.step.endLayer");
      s.prev = r.getPrev();
      s.next = r.getNext();
      s.inputs = to_int(r.getInputs(), "call.step.inputs");
      s.targets = to_int(r.getTargets(), "call.step.targets");
      s.first_micro = to_int64(r.getFirstMicro(), "call.step.firstMicro");
      s.train_step = r.getTrainStep();
      s.accumulate = r.getAccumulate();
      check_list(r.getProgram(), lim, "call.step.program");
      for (auto in : r.getProgram()) s.program.push_back({static_cast<int>(in.getKind()), in.getMicro()});
      s.to_prev = read_link(r.getToPrev());
      s.to_next = read_link(r.getToNext());
      check_list(r.getSamples(), lim, "call.step.samples");
      for (auto ids : r.getSamples()) {
        check_list(ids, lim, "call.step.samples");
        auto& out = s.samples.emplace_back();
        for (auto id : ids) out.push_back(id);
      }
      s.inputs_from_samples = r.getInputsFromSamples();
      s.targets_from_samples = r.getTargetsFromSamples();
      s.more = r.getMore();
      s.resume = r.getResume();
      s.evaluate = r.getEvaluate();
      check_list(r.getAheadSamples(), lim, "call.step.aheadSamples");
      for (auto id : r.getAheadSamples()) s.ahead.push_back(id);
      return s;
    }
    case Op::ACTIVATION:
      return ops::activation{o.getActivation().getTag(), to_int(o.getActivation().getMicro(), "call.activation.micro"), o.getActivation().getFrom()};
    case Op::GRADIENT:
      return ops::gradient{o.getGradient().getTag(), to_int(o.getGradient().getMicro(), "call.gradient.micro"), o.getGradient().getFrom()};
    case Op::STAGE_REPORT: {
      auto r = o.getStageReport();
      ops::stage_report s;
      s.device = r.getDevice();
      s.tag = r.getTag();
      s.messages = to_int(r.getMessages(), "call.stageReport.messages");
      s.compute_s = r.getComputeS();
      s.wait_s = r.getWaitS();
      s.loss_sum = r.getLossSum();
      s.error = text(r.getError(), lim, "call.stageReport.error");
      s.interim = r.getInterim();
      s.idle_s = r.getIdleS();
      check_list(r.getLinks(), lim, "call.stageReport.links");
      for (auto l : r.getLinks())
        s.links.push_back({l.getFrom(), l.getTo(), l.getBytes(), l.getBusyS(), to_int(l.getTransfers(), "call.stageReport.links.transfers")});
      return s;
    }
    case Op::GRADIENTS: {
      auto r = o.getGradients();
      ops::gradients g{r.getTag(), {}};
      check_list(r.getLayers(), lim, "call.gradients.layers");
      for (auto l : r.getLayers()) g.layers.push_back(to_int(l, "call.gradients.layers"));
      return g;
    }
    case Op::GRADIENT_SET: {
      auto r = o.getGradientSet();
      ops::gradient_set g{r.getDevice(), r.getTag(), {}};
      check_list(r.getLayers(), lim, "call.gradientSet.layers");
      for (auto l : r.getLayers())
        g.layers.push_back({to_int(l.getLayer(), "call.gradientSet.layers.layer"),
                            to_int(l.getTensorsPerPart(), "call.gradientSet.layers.tensorsPerPart"),
                            read_places(l.getParts(), lim, "call.gradientSet.layers.parts")});
      return g;
    }
    case Op::APPLY:
      return ops::apply{o.getApply().getTag(), to_int(o.getApply().getLayer(), "call.apply.layer"), o.getApply().getDivisor(),
                        o.getApply().getScale()};
    case Op::HASH: return ops::hash{to_int(o.getHash(), "call.hash")};
    case Op::HASHED: return ops::hashed{o.getHashed()};
    case Op::COPY: return ops::copy{to_int(o.getCopy(), "call.copy")};
    case Op::COPY_LEAN: return ops::copy_lean{to_int(o.getCopyLean(), "call.copyLean")};
    case Op::SAVE_SHARD:
      return ops::save_shard{to_int(o.getSaveShard().getLayer(), "call.saveShard.layer"), text(o.getSaveShard().getPath(), lim, "call.saveShard.path")};
    case Op::SHARD_SAVED: {
      auto r = o.getShardSaved();
      return ops::shard_saved{text(r.getSha256(), lim, "call.shardSaved.sha256"), r.getBytes(), text(r.getError(), lim, "call.shardSaved.error")};
    }
    case Op::PERTURB: return ops::perturb{to_int(o.getPerturb(), "call.perturb")};
    case Op::RETIRE: return ops::retire{};
    case Op::FAIL: return ops::fail{o.getFail()};
    case Op::PAUSE: return ops::pause{o.getPause().getAfterUs(), o.getPause().getCutOff(), o.getPause().getSeconds()};
    case Op::MEMORY: return ops::memory{o.getMemory()};
    case Op::TIMING: {
      ops::timing t;
      check_list(o.getTiming(), lim, "call.timing");
      for (auto l : o.getTiming()) t.layers.push_back({l.getForwardS(), l.getBackwardS(), l.getFixedS(), l.getUpdateS()});
      return t;
    }
    case Op::REDUCE: {
      auto r = o.getReduce();
      ops::reduce x{r.getTag(), to_int(r.getLayer(), "call.reduce.layer"), to_int64(r.getMicroBatches(), "call.reduce.microBatches"),
                    r.getExact(), {}, {}, 0, {}, 0};
      check_list(r.getHolders(), lim, "call.reduce.holders");
      for (auto h : r.getHolders()) x.holders.push_back(h);
      x.store = text(r.getStore(), lim, "call.reduce.store");
      x.generation = to_int64(r.getGeneration(), "call.reduce.generation");
      check_list(r.getLayers(), lim, "call.reduce.layers");
      for (auto l : r.getLayers()) x.layers.push_back(l);
      x.norms_divisor = r.getNormsDivisor();
      return x;
    }
    case Op::SUM_HELD: {
      auto r = o.getSumHeld();
      ops::sum_held x{r.getTag(), to_int(r.getLayer(), "call.sumHeld.layer"), to_int64(r.getBytesIn(), "call.sumHeld.bytesIn"), {}};
      check_list(r.getNorms(), lim, "call.sumHeld.norms");
      for (auto l : r.getNorms()) {
        check_list(l, lim, "call.sumHeld.norms");
        x.norms.emplace_back();
        for (const float v : l) x.norms.back().push_back(v);
      }
      return x;
    }
    case Op::REDUCE_PART: {
      auto r = o.getReducePart();
      return ops::reduce_part{r.getTag(), to_int(r.getLayer(), "call.reducePart.layer"), r.getGather(),
                              to_int(r.getFrom(), "call.reducePart.from"), read_places(r.getParts(), lim, "call.reducePart.parts"),
                              r.getDevice()};
    }
    case Op::COMMIT:
      return ops::commit{o.getCommit().getTag(), to_int(o.getCommit().getLayer(), "call.commit.layer"), o.getCommit().getDivisor(),
                         o.getCommit().getScale()};
  }
  throw reject{"bad_field", "call.op has an unknown kind (a newer protocol?)"};
}

}  // namespace

device_call read_call(schema::DeviceCall::Reader r, const decode_limits& lim) {
  device_call m;
  m.id = r.getId();
  m.device = r.getDevice();
  auto ts = r.getTensors();
  check_list(ts, lim, "call.tensors");
  for (auto t : ts) {
    tensor_meta tm;
    tm.dtype = t.getDtype();
    check_list(t.getShape(), lim, "call.tensors.shape");
    for (auto v : t.getShape()) tm.shape.push_back(v);
    check_list(t.getStrides(), lim, "call.tensors.strides");
    for (auto v : t.getStrides()) tm.strides.push_back(v);
    m.tensors.push_back(std::move(tm));
  }
  m.op = read_op(r.getOp(), lim);
  return m;
}

}  // namespace dynapar::wire
