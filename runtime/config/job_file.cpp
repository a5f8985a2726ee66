#include "config/job_file.hpp"

#include <limits>

#include "config/scenario_file.hpp"
#include "config/yaml_fields.hpp"
#include "planner/policy.hpp"

namespace dynapar::config {
namespace {

// optimizer.schedule: {kind: constant | step | cosine, ...} (docs/FORMATS.md).
lr_schedule parse_schedule(const fields& f, double lr) {
  f.only({"kind", "warmup_steps", "steps", "step_size", "gamma", "min_lr"});
  lr_schedule s;
  s.kind = f.text("kind", s.kind);
  const auto only_for = [&](const char* key, const char* kind) {
    if (f.has(key) && s.kind != kind)
      throw field_error{"field 'optimizer.schedule." + std::string(key) + "' belongs to kind " + kind + ", not " + s.kind};
  };
  for (const char* k : {"warmup_steps", "steps", "min_lr"}) only_for(k, "cosine");
  for (const char* k : {"step_size", "gamma"}) only_for(k, "step");
  s.warmup_steps = f.integer("warmup_steps", 0);
  s.steps = f.integer("steps", 0);
  s.step_size = f.integer("step_size", 1);
  s.gamma = f.number("gamma", s.gamma);
  s.min_lr = f.number("min_lr", 0);
  if (auto st = check_schedule(s, lr); !st) throw field_error{"optimizer." + st.err().message};
  return s;
}

// faults: {seed, at: [{step, kind, device, factor, steps, seconds, moment}], random: {...}}
sim::fault_plan parse_faults(const fields& top, const planner::cluster_state& cluster, std::int64_t steps) {
  sim::fault_plan plan;
  fields f(top.child("faults"), "faults");
  f.only({"seed", "at", "random"});
  plan.seed = static_cast<std::uint64_t>(f.integer("seed", 0));
  auto known = [&](int id) {
    for (const auto& d : cluster.devices)
      if (d.id == id) return true;
    return false;
  };
  if (f.has("at")) {
    const auto list = f.child("at");
    if (!list.IsSequence()) throw field_error{"field 'faults.at' must be a list"};
    for (std::size_t k = 0; k < list.size(); ++k) {
      const std::string where = "faults.at[" + std::to_string(k) + "]";
      fields e(list[k], where);
      e.only({"step", "kind", "device", "factor", "steps", "seconds", "moment"});
      sim::fault x;
      x.step = e.integer("step");
      if (x.step < 0 || (steps > 0 && x.step >= steps))
        throw field_error{where + ".step must be in [0, " + std::to_string(steps) + ")"};
      const auto kind = e.text("kind");
      if (kind == "kill") x.kind = sim::fault_kind::kill;
      else if (kind == "slow") x.kind = sim::fault_kind::slow;
      else if (kind == "pause") x.kind = sim::fault_kind::pause;
      else if (kind == "partition") x.kind = sim::fault_kind::partition;
      else if (kind == "corrupt") x.kind = sim::fault_kind::corrupt;
      else throw field_error{where + ".kind must be kill, slow, pause, partition or corrupt"};
      x.device = e.integer("device", -1);
      if (x.device != -1 && !known(x.device))
        throw field_error{where + ".device " + std::to_string(x.device) + " is not in the job's devices (omit it: one the plan uses)"};
      if (x.kind == sim::fault_kind::slow) {
        x.factor = e.number("factor");
        x.steps = e.integer("steps");
        if (!(x.factor > 0 && x.factor <= 1) || x.steps < 1)
          throw field_error{where + ": slow needs factor in (0, 1] and steps >= 1"};
      }
      if (e.has("moment")) {
        const auto m = e.text("moment");
        if (!sim::moment_of(m, x.moment))
          throw field_error{where + ".moment must be step, replan, migration, sum, checkpoint, evaluation, early, shard, placement or joining, not '" +
                            m + "'"};
        const bool hang_moment = x.moment == sim::fault_moment::sum || x.moment == sim::fault_moment::checkpoint ||
                                 x.moment == sim::fault_moment::evaluation;
        if (x.kind == sim::fault_kind::pause && x.moment != sim::fault_moment::step && !hang_moment)
          throw field_error{where + ".moment: a pause waits for a sum, a checkpoint or an evaluation, not a " + std::string(sim::name(x.moment))};
        if (x.kind != sim::fault_kind::kill && x.kind != sim::fault_kind::pause && x.moment != sim::fault_moment::step)
          throw field_error{where + ".moment: only a kill or a pause waits for a moment (a " + std::string(sim::name(x.kind)) +
                            " lands in its step)"};
      }
      if (x.kind == sim::fault_kind::pause || x.kind == sim::fault_kind::partition) {
        x.seconds = e.number("seconds");
        if (!(x.seconds > 0 && x.seconds <= 3600)) throw field_error{where + ".seconds must be in (0, 3600]"};
      }
      plan.at.push_back(x);
    }
  }
  if (f.has("random")) {
    fields r(f.child("random"), "faults.random");
    r.only({"kills", "pauses", "slows", "from_step", "to_step", "pause_s", "slow_factor", "slow_steps"});
    auto& x = plan.random;
    x.kills = r.integer("kills", 0);
    x.pauses = r.integer("pauses", 0);
    x.slows = r.integer("slows", 0);
    x.from_step = r.integer("from_step", 1);
    x.to_step = r.integer("to_step", -1);
    x.pause_s = r.number("pause_s", x.pause_s);
    x.slow_factor = r.number("slow_factor", x.slow_factor);
    x.slow_steps = r.integer("slow_steps", x.slow_steps);
    const auto count_ok = [](std::int64_t n) { return n >= 0 && n <= 100'000; };
    if (!count_ok(x.kills) || !count_ok(x.pauses) || !count_ok(x.slows) || x.from_step < 0 || x.slow_steps < 1 ||
        !(x.pause_s > 0 && x.pause_s <= 3600) || !(x.slow_factor > 0 && x.slow_factor <= 1) || (x.to_step >= 0 && x.to_step < x.from_step))
      throw field_error{"faults.random: counts in 0..100000, 0 <= from_step <= to_step, pause_s in (0, 3600], slow_factor in (0, 1], "
                        "slow_steps >= 1"};
  }
  return plan;
}

// `data: KIND` or `data: {kind, path, ...}`; synthetic_samples stays a top-level field.
void parse_data(const fields& top, data::source& d) {
  d.synthetic_samples = 6000;
  if (top.has("data") && top.child("data").IsMap()) {
    fields f(top.child("data"), "data");
    f.only({"kind", "path", "val_share", "mean", "std", "classes", "token_type", "window", "stride", "vocab", "size", "channels", "crop_pad", "flip", "read_ahead"});
    d.kind = f.text("kind");
    d.path = f.text("path", "");
    d.val_share = f.number("val_share", d.val_share);
    d.mean = f.numbers("mean", d.mean);
    d.std_dev = f.numbers("std", d.std_dev);
    d.classes = f.integer("classes", d.classes);
    d.token_type = f.text("token_type", d.token_type);
    d.window = f.integer("window", d.window);
    d.stride = f.integer("stride", d.stride);
    d.vocab = f.integer("vocab", d.vocab);
    // images: size N (square) or [rows, cols]
    if (f.has("size")) {
      const auto sz = f.child("size");
      if (sz.IsSequence() && sz.size() == 2) {
        d.image_rows = sz[0].as<int>(), d.image_cols = sz[1].as<int>();
      } else {
        d.image_rows = d.image_cols = f.integer("size");
      }
    }
    d.image_channels = f.integer("channels", d.image_channels);
    d.crop_pad = f.integer("crop_pad", d.crop_pad);
    d.flip = f.boolean("flip", d.flip);
    d.read_ahead = f.integer("read_ahead", d.read_ahead);
  } else {
    d.kind = top.text("data", d.kind);
  }
  if (d.kind != "fashion_mnist" && d.kind != "synthetic" && d.kind != "fortunes" && d.kind != "npy" && d.kind != "tokens" && d.kind != "images" && d.kind != "torch")
    throw field_error{"field 'data' must be fashion_mnist, synthetic, fortunes, or a map with kind npy, tokens, images or torch"};
  d.synthetic_samples = top.integer("synthetic_samples", d.synthetic_samples);
  // Upper bounds keep a mistyped file from asking for memory no run needs.
  if (d.synthetic_samples < 1 || d.synthetic_samples > 1'000'000)
    throw field_error{"field 'synthetic_samples' must be in 1..1000000 (784 MB of images)"};
  if (auto st = data::check(d); !st) throw field_error{st.err().message};
}

// A job without `devices:` takes its devices from the nodes that host them, each described
// by its node (`dynapar node --devices auto`: its memory) and measured as it joins (its
// speed, by the probe): the pool is `max_devices` ids (default 64), none of them known in
// advance. Without listed devices there is nothing to emulate, no price or power to budget
// and no device to name in a fixed plan. Returns the document with the pool listed.
YAML::Node with_described_pool(const YAML::Node& doc, bool& described) {
  fields top(doc, "");
  described = doc.IsMap() && !doc["devices"];
  if (!described) {
    if (top.has("max_devices")) throw field_error{"field 'max_devices' sizes the pool of a job without 'devices'; this job lists its devices"};
    return doc;
  }
  if (top.boolean("emulate", true))
    throw field_error{"field 'devices' is required with emulate: true (emulated devices need their speeds); with emulate: false, "
                      "nodes describe their devices as they join (dynapar node --devices auto; docs/CLUSTERS.md)"};
  if (top.integer("replan_every", 0) <= 0)
    throw field_error{"a job without 'devices' needs a controller to plan for the devices that join: set replan_every"};
  if (top.has("plan")) throw field_error{"field 'plan' names devices, and this job lists none"};
  if (top.has("budget")) throw field_error{"field 'budget': a job without 'devices' has no prices or power to budget"};
  const int pool = top.integer("max_devices", 64);
  if (pool < 1 || pool > 4096) throw field_error{"field 'max_devices' must be in 1..4096"};
  YAML::Node out = YAML::Clone(doc);
  out.remove("max_devices");
  YAML::Node entry;
  entry["id"] = 0;
  entry["count"] = pool;
  entry["name"] = "auto";
  out["devices"].push_back(entry);
  return out;
}

}  // namespace

result<job> parse_job(const YAML::Node& given, const std::string& name) {
  bool described = false;
  YAML::Node doc;
  try {
    doc = with_described_pool(given, described);
  } catch (const field_error& e) {
    return make_error("bad_config", e.message);
  } catch (const YAML::Exception& e) {
    return make_error("bad_config", std::string("malformed YAML: ") + e.what());
  }
  auto base = parse_cluster(doc, {"name", "data", "synthetic_samples", "steps", "epochs", "optimizer", "policy",
                                  "hash_every", "threads", "plan", "exact", "emulate", "replan_every", "emulate_cores", "emulate_compute", "profile", "dynamics",
                                  "faults", "step_deadline_s", "verify_tolerance", "hysteresis", "regret", "loss", "precision"});
  if (!base) return base.err();
  try {
    fields top(doc, "");
    job j;
    j.name = top.text("name", name);
    j.cluster = std::move(*base);
    j.cluster.described = described;
    j.model = j.cluster.model.empty() ? j.model : j.cluster.model;
    j.seed = j.cluster.planner.seed;
    j.data.seed = j.seed;
    parse_data(top, j.data);
    // Upper bounds keep a mistyped file from asking for what no run needs: a training job's
    // devices are actors of this process or of its nodes, each with threads and buffers.
    if (j.cluster.cluster.devices.size() > 4096)
      throw field_error{"field 'devices' lists " + std::to_string(j.cluster.cluster.devices.size()) +
                        " devices; a training job takes at most 4096 (a scenario for `dynapar simulate` takes more)"};
    j.steps = top.integer("steps", 0);
    if (j.steps < 0 || j.steps > 1'000'000'000) throw field_error{"field 'steps' must be in 0..1000000000"};
    j.epochs = top.number("epochs", j.epochs);
    if (j.steps == 0 && !(j.epochs > 0 && j.epochs <= 1'000'000)) throw field_error{"field 'epochs' must be in (0, 1000000] (or give 'steps')"};
    if (top.has("loss")) {
      fields l(top.child("loss"), "loss");
      l.only({"kind", "label_smoothing"});
      const auto kind = l.text("kind", "cross_entropy");
      if (kind != "cross_entropy" && kind != "mse" && kind != "next_token")
        throw field_error{"field 'loss.kind': '" + kind +
                          "' is not supported; cross_entropy (class labels), mse (npy labels to regress) or next_token (every position of a token window) is"};
      // The loss follows the targets (model::loss_sum): mse reads the labels as reals,
      // next_token takes every position's next id.
      j.data.regression = kind == "mse";
      j.data.next_token = kind == "next_token";
      if (j.data.regression && l.has("label_smoothing")) throw field_error{"field 'loss.label_smoothing' smooths class labels; loss mse has none"};
      j.label_smoothing = l.number("label_smoothing", 0);
      if (!(j.label_smoothing >= 0 && j.label_smoothing < 1)) throw field_error{"field 'loss.label_smoothing' must be in [0, 1)"};
    }
    if (top.has("optimizer")) {
      fields o(top.child("optimizer"), "optimizer");
      o.only({"kind", "lr", "momentum", "weight_decay", "nesterov", "schedule", "clip_grad_norm"});
      j.optimizer = o.text("kind", j.optimizer);
      if (j.optimizer != "adam" && j.optimizer != "adamw" && j.optimizer != "sgd")
        throw field_error{"field 'optimizer.kind' must be adam, adamw or sgd"};
      j.lr = o.positive("lr", j.lr);
      j.momentum = o.number("momentum", j.momentum);
      j.weight_decay = o.number("weight_decay", j.optimizer == "adamw" ? 0.01 : j.weight_decay);
      j.nesterov = o.boolean("nesterov", j.nesterov);
      if (j.momentum < 0 || j.weight_decay < 0) throw field_error{"optimizer momentum and weight_decay must be >= 0"};
      if (j.nesterov && (j.optimizer != "sgd" || !(j.momentum > 0)))
        throw field_error{"field 'optimizer.nesterov' needs kind sgd and momentum > 0"};
      if (o.has("schedule")) j.schedule = parse_schedule(fields(o.child("schedule"), "optimizer.schedule"), j.lr);
      j.clip_grad_norm = o.number("clip_grad_norm", j.clip_grad_norm);
      if (!(j.clip_grad_norm >= 0)) throw field_error{"field 'optimizer.clip_grad_norm' must be >= 0 (0: no clipping)"};
      // The optimizers compute in float32: a larger value would throw inside LibTorch.
      for (auto [field, v] : {std::pair{"lr", j.lr}, std::pair{"momentum", j.momentum}, std::pair{"weight_decay", j.weight_decay},
                             std::pair{"clip_grad_norm", j.clip_grad_norm}})
        if (!(v <= std::numeric_limits<float>::max()))
          throw field_error{std::string("field 'optimizer.") + field + "' must be finite and at most 3.4e38 (the optimizer computes in float32)"};
    }
    const auto precision = top.text("precision", "fp32");
    if (precision != "fp32" && precision != "bf16")
      throw field_error{"field 'precision': '" + precision + "' is not supported; fp32 (the default) or bf16 (each forward under autocast to bfloat16) is"};
    j.bf16 = precision == "bf16";
    j.policy = top.text("policy", j.policy);
    if (auto p = planner::make_policy(j.policy); !p) throw field_error{"field 'policy': " + p.err().message};
    j.hash_every = top.integer("hash_every", j.hash_every);
    j.threads = top.integer("threads", j.threads);
    if (j.hash_every < 0 || j.threads < 1 || j.threads > 1024) throw field_error{"hash_every must be >= 0 and threads in 1..1024"};
    j.exact = top.boolean("exact", j.exact);
    j.hysteresis = top.boolean("hysteresis", j.hysteresis);
    j.regret = top.boolean("regret", j.regret);
    j.verify_tolerance = top.number("verify_tolerance", j.exact ? 0.0 : 0.05);
    if (!(j.verify_tolerance >= 0)) throw field_error{"field 'verify_tolerance' must be >= 0"};
    j.emulate = top.boolean("emulate", j.emulate);
    j.replan_every = top.integer("replan_every", 0);
    if (j.replan_every < 0) throw field_error{"field 'replan_every' must be >= 0"};
    j.emulate_cores = top.number("emulate_cores", 0);
    if (!(j.emulate_cores >= 0 && j.emulate_cores <= 4096))
      throw field_error{"field 'emulate_cores' must be in 0..4096 (0: this machine's hardware threads)"};
    j.profile = top.text("profile", j.profile);
    j.emulate_compute = top.text("emulate_compute", j.emulate_compute);
    if (j.emulate_compute != "cpu" && j.emulate_compute != "profile")
      throw field_error{"field 'emulate_compute' must be 'cpu' or 'profile', not '" + j.emulate_compute + "'"};
    j.dynamics.cluster = j.cluster.cluster;
    j.dynamics.seed = j.seed;
    parse_dynamics(top, j.dynamics);
    bool departs = j.dynamics.random.departure_rate > 0;
    // A 'fail' event kills the device at a random moment of the slot's first step
    // (docs/RELIABILITY.md); like a leave, going on without it needs a controller.
    for (const auto& e : j.dynamics.events) departs = departs || e.kind == sim::event_kind::leave || e.kind == sim::event_kind::fail;
    for (const auto& t : j.dynamics.traces) departs = departs || !t.available.empty();
    if (departs && j.replan_every == 0)
      throw field_error{"dynamics in which devices leave need a controller to re-plan: set replan_every"};
    if (top.has("faults")) {
      j.faults = parse_faults(top, j.cluster.cluster, j.steps);
      bool crashes = j.faults.random.kills + j.faults.random.pauses > 0;
      for (const auto& f : j.faults.at) crashes = crashes || (f.kind != sim::fault_kind::slow && f.kind != sim::fault_kind::corrupt);
      if (crashes && j.replan_every == 0)
        throw field_error{"faults that take devices down need a controller to re-plan: set replan_every"};
    }
    j.step_deadline_s = top.number("step_deadline_s", 0);
    if (!(j.step_deadline_s >= 0 && j.step_deadline_s <= 86400))
      throw field_error{"field 'step_deadline_s' must be in 0..86400 (0: automatic)"};
    auto& cfg = j.cluster.planner;
    if (j.exact) {
      if (cfg.micro_batch == 0) cfg.micro_batch = std::min(16, cfg.batch);
      if (cfg.batch % cfg.micro_batch != 0)
        throw field_error{"exact training needs the batch to be a multiple of micro_batch (" + std::to_string(cfg.micro_batch) + ")"};
      cfg.share_quantum = cfg.micro_batch;
    }
    if (top.has("plan")) {
      const auto list = top.child("plan");
      if (!list.IsSequence() || list.size() == 0) throw field_error{"field 'plan' must be a non-empty list of groups"};
      planner::plan p;
      p.schedule = j.cluster.planner.schedule;
      for (std::size_t g = 0; g < list.size(); ++g) {
        const std::string where = "plan[" + std::to_string(g) + "]";
        fields f(list[g], where);
        f.only({"devices", "splits", "share", "micro_batch"});
        planner::group_plan gp;
        try {
          gp.devices = f.child("devices").as<std::vector<int>>();
          gp.splits = f.child("splits").as<std::vector<int>>();
        } catch (const YAML::Exception&) {
          throw field_error{where + ".devices and .splits must be lists of integers"};
        }
        gp.share = f.integer("share");
        gp.micro_batch = f.integer("micro_batch", j.exact ? cfg.micro_batch : gp.share);
        if (j.exact && (gp.micro_batch != cfg.micro_batch || gp.share % cfg.micro_batch != 0))
          throw field_error{where + ": exact training needs micro_batch " + std::to_string(cfg.micro_batch) +
                            " in every group and shares that are multiples of it (or exact: false)"};
        p.groups.push_back(std::move(gp));
      }
      std::vector<int> ids;
      for (const auto& d : j.cluster.cluster.devices) ids.push_back(d.id);
      // Layer counts are checked against the model when it is built.
      if (auto v = planner::validate(p, p.groups[0].splits.back(), j.cluster.planner.batch, ids); !v)
        throw field_error{v.err().message};
      j.plan = std::move(p);
    }
    return j;
  } catch (const field_error& e) {
    return make_error("bad_config", e.message);
  } catch (const YAML::Exception& e) {
    return make_error("bad_config", std::string("malformed YAML: ") + e.what());
  }
}

result<job> load_job_file(const std::string& path) {
  return load_document(path, parse_job);
}

}  // namespace dynapar::config
