#include "config/job_file.hpp"

#include "config/scenario_file.hpp"
#include "config/yaml_fields.hpp"
#include "planner/policy.hpp"

namespace dynapar::config {

result<job> parse_job(const YAML::Node& doc, const std::string& name) {
  auto base = parse_cluster(doc, {"name", "data", "synthetic_samples", "steps", "epochs", "optimizer", "policy",
                                  "hash_every", "threads", "plan", "exact", "emulate", "replan_every", "emulate_cores", "dynamics"});
  if (!base) return base.err();
  try {
    fields top(doc, "");
    job j;
    j.name = top.text("name", name);
    j.cluster = std::move(*base);
    j.model = j.cluster.model.empty() ? j.model : j.cluster.model;
    j.seed = j.cluster.planner.seed;
    j.data = top.text("data", j.data);
    if (j.data != "fashion_mnist" && j.data != "synthetic") throw field_error{"field 'data' must be fashion_mnist or synthetic"};
    j.synthetic_samples = top.integer("synthetic_samples", j.synthetic_samples);
    if (j.synthetic_samples < 1) throw field_error{"field 'synthetic_samples' must be >= 1"};
    j.steps = top.integer("steps", 0);
    if (j.steps < 0) throw field_error{"field 'steps' must be >= 0"};
    j.epochs = top.number("epochs", j.epochs);
    if (j.steps == 0 && !(j.epochs > 0)) throw field_error{"field 'epochs' must be > 0 (or give 'steps')"};
    if (top.has("optimizer")) {
      fields o(top.child("optimizer"), "optimizer");
      o.only({"kind", "lr", "momentum", "weight_decay"});
      j.optimizer = o.text("kind", j.optimizer);
      if (j.optimizer != "adam" && j.optimizer != "sgd") throw field_error{"field 'optimizer.kind' must be adam or sgd"};
      j.lr = o.positive("lr", j.lr);
      j.momentum = o.number("momentum", j.momentum);
      j.weight_decay = o.number("weight_decay", j.weight_decay);
      if (j.momentum < 0 || j.weight_decay < 0) throw field_error{"optimizer momentum and weight_decay must be >= 0"};
    }
    j.policy = top.text("policy", j.policy);
    if (auto p = planner::make_policy(j.policy); !p) throw field_error{"field 'policy': " + p.err().message};
    j.hash_every = top.integer("hash_every", j.hash_every);
    j.threads = top.integer("threads", j.threads);
    if (j.hash_every < 0 || j.threads < 1) throw field_error{"hash_every must be >= 0 and threads >= 1"};
    j.exact = top.boolean("exact", j.exact);
    j.emulate = top.boolean("emulate", j.emulate);
    j.replan_every = top.integer("replan_every", 0);
    if (j.replan_every < 0) throw field_error{"field 'replan_every' must be >= 0"};
    j.emulate_cores = top.number("emulate_cores", 0);
    if (j.emulate_cores < 0) throw field_error{"field 'emulate_cores' must be >= 0 (0: this machine's hardware threads)"};
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
