// Cluster files: what is written is what the planner gets; mistakes name their field.
#include <catch2/catch.hpp>

#include "config/cluster_file.hpp"
#include "config/job_file.hpp"
#include "config/profile_json.hpp"
#include "config/scenario_file.hpp"

using namespace dynapar;

namespace {
std::string parse_error(const std::string& text) {
  auto r = config::parse_cluster(YAML::Load(text));
  return r ? "" : r.err().message;
}
std::string job_error(const std::string& text) {
  auto r = config::parse_job(YAML::Load(text), "t");
  return r ? std::string() : r.err().message;
}
}  // namespace

TEST_CASE("a cluster file becomes devices, links, budgets and settings", "[unit][config]") {
  auto r = config::parse_cluster(YAML::Load(R"(
batch: 128
schedule: gpipe
micro_batch: 4
v: 50
budget: {cost_per_slot: 0.5, energy_per_slot: {2: 300}, slot_slack: 0.25, payback: 0.1}
links:
  same_node: {bandwidth_gbps: 800, latency_us: 2}
  overrides: [{a: 0, b: 2, bandwidth_gbps: 8, latency_us: 100}]
devices:
  - {id: 0, name: a100, speed: 8, memory_gb: 40, price_per_hour: 3.6, node: 0}
  - {name: t4, count: 2, speed: 2, nodes_of: 1, node: 5, nic_gbps: 8}
)"));
  REQUIRE(r);
  CHECK(r->planner.batch == 128);
  CHECK(r->planner.schedule == planner::schedule_kind::gpipe);
  CHECK(r->planner.micro_batch == 4);
  CHECK(r->budget.cost_per_slot == 0.5);
  REQUIRE(r->budget.energy_per_slot.size() == 1);
  CHECK(r->budget.energy_per_slot[0].device_id == 2);
  CHECK(r->budget.slot_slack == 0.25);
  CHECK(r->budget.payback == 0.1);
  REQUIRE(r->cluster.devices.size() == 3);
  CHECK(r->cluster.devices[0].price_per_s == Approx(0.001));
  CHECK(r->cluster.devices[1].id == 1);
  CHECK(r->cluster.devices[2].id == 2);
  CHECK(r->cluster.devices[2].node == 6);
  CHECK(r->cluster.devices[2].nic_bw == Approx(1e9));
  CHECK(r->cluster.tiers.same_node.bw == Approx(100e9));
  planner::link_table links(r->cluster);
  CHECK(links.bw(0, 2) == Approx(1e9));
  CHECK(links.lat(0, 2) == Approx(1e-4));
  CHECK(r->planner.overlap_sums);  // the default
  auto deep = config::parse_cluster(YAML::Load("schedule: 1f1b-deep\noverlap_sums: false\ndevices: [{}]"));
  REQUIRE(deep);
  CHECK(deep->planner.schedule == planner::schedule_kind::deep_1f1b);
  CHECK_FALSE(deep->planner.overlap_sums);
  CHECK(r->planner.dispatch_probe == Approx(0.33));  // the default
  auto off = config::parse_cluster(YAML::Load("dispatch_probe: 0\ndevices: [{}]"));
  REQUIRE(off);
  CHECK(off->planner.dispatch_probe == 0);
}

TEST_CASE("mistakes in a cluster file name the field", "[unit][config]") {
  CHECK(parse_error("devices: [{speed: 0}]").find("devices[0].speed") != std::string::npos);
  CHECK(parse_error("devices: [{sped: 1}]").find("unknown field 'devices[0].sped'") != std::string::npos);
  CHECK(parse_error("devices: [{speed: fast}]").find("must be a number") != std::string::npos);
  CHECK(parse_error("batch: 0\ndevices: [{}]").find("batch") != std::string::npos);
  CHECK(parse_error("devices: []").find("devices") != std::string::npos);
  CHECK(parse_error("devices: [{id: 1}, {id: 1}]").find("repeated") != std::string::npos);
  CHECK(parse_error("schedule: pipedream\ndevices: [{}]").find("'gpipe', '1f1b' or '1f1b-deep'") != std::string::npos);
  CHECK(parse_error("overlap_sums: sometimes\ndevices: [{}]").find("overlap_sums") != std::string::npos);
  CHECK(parse_error("dispatch_probe: 1\ndevices: [{}]").find("'dispatch_probe' must be in [0, 1)") != std::string::npos);
  CHECK(parse_error("dispatch_probe: -0.1\ndevices: [{}]").find("dispatch_probe") != std::string::npos);
  CHECK(parse_error("colour: red\ndevices: [{}]").find("unknown field 'colour'") != std::string::npos);
  // A key given twice: the parser would keep one value silently.
  CHECK(parse_error("batch: 64\nbatch: 128\ndevices: [{}]").find("field 'batch' is given twice") != std::string::npos);
  CHECK(parse_error("devices: [{speed: 1, speed: 2}]").find("field 'devices[0].speed' is given twice") != std::string::npos);
  CHECK(parse_error("links: {overrides: [{a: 0, b: 9, bandwidth_gbps: 1}]}\ndevices: [{}]").find("unknown device") != std::string::npos);
  CHECK(parse_error("budget: {energy_per_slot: {7: 10}}\ndevices: [{}]").find("unknown device id 7") != std::string::npos);
  CHECK(parse_error("budget: {slot_slack: -1}\ndevices: [{}]").find("budget.slot_slack") != std::string::npos);
  CHECK(parse_error("budget: {payback: 2}\ndevices: [{}]").find("budget.payback") != std::string::npos);
  CHECK(parse_error("- 1\n- 2").find("must be a map") != std::string::npos);
  // Sizes no run needs (a typo of a few digits) are refused before anything is allocated.
  CHECK(parse_error("batch: 1048576\ndevices: [{}]").empty());
  CHECK(parse_error("batch: 1048577\ndevices: [{}]").find("'batch' must be in 1..1048576") != std::string::npos);
  CHECK(parse_error("eval_budget: 10000001\ndevices: [{}]").find("eval_budget") != std::string::npos);
  CHECK(parse_error("warm_eval_budget: 2e9\ndevices: [{}]").find("warm_eval_budget") != std::string::npos);
  CHECK(parse_error("max_stages: 1025\ndevices: [{}]").find("max_stages") != std::string::npos);
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:x", "cuda:-1", "cuda:1234"})
    CHECK(parse_error(std::string("devices: [{place: \"") + bad + "\"}]").find("devices[0].place") != std::string::npos);
}

TEST_CASE("places: a device's place per id, every id of a count, the CPU by default", "[unit][config]") {
  auto r = config::parse_cluster(YAML::Load(R"(
devices:
  - {id: 0, place: "cuda:0"}
  - {id: 1, count: 2, place: "cuda:1"}
  - {id: 3}
  - {id: 4, place: cpu}
)"));
  REQUIRE(r);
  CHECK(r->places == std::map<int, std::string>{{0, "cuda:0"}, {1, "cuda:1"}, {2, "cuda:1"}});
  CHECK(r->cluster.devices.size() == 5);
}

TEST_CASE("profile JSON round-trips and rejects bad layers", "[unit][config]") {
  auto m = config::load_profile("fmnist_cnn");
  REQUIRE(m);
  auto back = config::profile_from_json(config::profile_to_json(*m));
  REQUIRE(back);
  REQUIRE(back->num_layers() == m->num_layers());
  CHECK(back->layers[1].param_bytes == m->layers[1].param_bytes);
  auto upd = config::profile_from_json(nlohmann::json::parse(R"({"layers": [{"fwd_s": 1, "bwd_s": 2, "update_s": 0.5}]})"));
  REQUIRE(upd);
  CHECK(upd->layers[0].update_s == 0.5);
  CHECK(config::profile_from_json(config::profile_to_json(*upd))->layers[0].update_s == 0.5);
  auto negative = config::profile_from_json(nlohmann::json::parse(R"({"layers": [{"fwd_s": 1, "bwd_s": 2, "update_s": -1}]})"));
  REQUIRE_FALSE(negative);
  CHECK(negative.err().message.find("update_s") != std::string::npos);
  auto bad = config::profile_from_json(nlohmann::json::parse(R"({"layers": [{"fwd_s": 1, "bwd_s": "x"}]})"));
  REQUIRE_FALSE(bad);
  CHECK(bad.err().message.find("layers[0].bwd_s") != std::string::npos);
  auto flops = config::profile_from_json(nlohmann::json::parse(
      R"({"reference_flops_per_s": 1e12, "layers": [{"fwd_flops": 2e9, "bwd_flops": 4e9}]})"));
  REQUIRE(flops);
  CHECK(flops->layers[0].fwd_s == Approx(2e-3));
  CHECK_FALSE(config::load_profile("no-such-model"));
}

TEST_CASE("job files: dynamics in the scenario format, and the mistakes a job can make with them", "[unit][config]") {
  const std::string base = "model: cnn\ndevices: [{id: 0}, {id: 1}]\n";
  auto ok = config::parse_job(YAML::Load(base + "replan_every: 5\nemulate_cores: 1.5\n"
                                         "dynamics: {events: [{slot: 3, kind: leave, device: 1}],"
                                         " traces: [{device: 0, speed: [[0, 1], [4, 0.5]]}]}"),
                              "t");
  REQUIRE(ok);
  CHECK(ok->emulate_cores == 1.5);
  REQUIRE(ok->dynamics.events.size() == 1);
  CHECK(ok->dynamics.events[0].slot == 3);
  CHECK(ok->dynamics.traces[0].speed[1].value == 0.5);
  CHECK(job_error(base + "dynamics: {events: [{slot: 3, kind: leave, device: 1}]}").find("set replan_every") != std::string::npos);
  // A crash, like a leave, needs a controller to go on without the device.
  CHECK(job_error(base + "dynamics: {events: [{slot: 3, kind: fail, device: 1}]}").find("set replan_every") != std::string::npos);
  CHECK(job_error(base + "replan_every: 5\ndynamics: {events: [{slot: 3, kind: leave, device: 7}]}").find("unknown device id 7") !=
        std::string::npos);
  CHECK(job_error(base + "emulate_cores: -1").find("emulate_cores") != std::string::npos);
  CHECK(job_error(base + "emulate_cores: 1e9").find("emulate_cores") != std::string::npos);
  CHECK(job_error(base + "data: synthetic\nsynthetic_samples: 1000000\nsteps: 1").empty());
  CHECK(job_error(base + "data: synthetic\nsynthetic_samples: 2e9\nsteps: 1").find("'synthetic_samples' must be in 1..1000000") !=
        std::string::npos);
  CHECK(job_error(base + "threads: 100000\nsteps: 1").find("threads in 1..1024") != std::string::npos);
  CHECK(job_error(base + "emulate_compute: gpu").find("emulate_compute") != std::string::npos);
  CHECK(config::parse_job(YAML::Load(base + "emulate_compute: profile"), "t")->emulate_compute == "profile");
  // Normalisation: one value for all channels, or one a channel.
  auto norm = config::parse_job(YAML::Load(base + "data: {kind: npy, path: d, mean: [0.5, 0.25, 0.125], std: 2}"), "t");
  REQUIRE(norm);
  CHECK((norm->data.mean == std::vector<double>{0.5, 0.25, 0.125} && norm->data.std_dev == std::vector<double>{2}));
  CHECK(job_error(base + "data: {kind: npy, path: d, mean: [0.5, x]}").find("field 'data.mean[1]' must be a number") != std::string::npos);
  CHECK(job_error(base + "data: {kind: npy, path: d, std: [1, 0]}").find("'data.std' must be > 0") != std::string::npos);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: sgd, clip_grad_norm: 1.5}"), "t")->clip_grad_norm == 1.5);
  CHECK(job_error(base + "optimizer: {clip_grad_norm: -1}").find("'optimizer.clip_grad_norm' must be >= 0") != std::string::npos);
  // Beyond float32 (found by the prepare_job fuzzer: LibTorch threw converting lr 1e308).
  CHECK(job_error(base + "optimizer: {kind: sgd, lr: 0.1e309}").find("'optimizer.lr' must be finite and at most 3.4e38") != std::string::npos);
  CHECK(job_error(base + "optimizer: {kind: sgd, lr: 0.1, momentum: .inf}").find("'optimizer.momentum'") != std::string::npos);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: sgd, lr: 3e38}"), "t"));
  CHECK(job_error(base + "data: {kind: images, path: d, mean: [0.5, 0.5]}").find("'data.mean' has 2 values; the images' channels are 3") !=
        std::string::npos);
}

TEST_CASE("job files: a fault plan, and the mistakes a fault plan can make", "[unit][config]") {
  const std::string base = "model: cnn\nsteps: 100\ndevices: [{id: 0}, {id: 1}]\n";
  auto ok = config::parse_job(YAML::Load(base + "replan_every: 5\nstep_deadline_s: 2\n"
                                         "faults: {seed: 3, at: [{step: 7, kind: pause, device: 1, seconds: 4},"
                                         " {step: 2, kind: slow, factor: 0.5, steps: 3}], random: {kills: 2, to_step: 50}}"),
                              "t");
  REQUIRE(ok);
  CHECK(ok->step_deadline_s == 2);
  REQUIRE(ok->faults.at.size() == 2);
  CHECK(ok->faults.at[0].kind == sim::fault_kind::pause);
  CHECK(ok->faults.at[0].seconds == 4);
  CHECK(ok->faults.at[1].device == -1);  // omitted: a device the plan uses, drawn at the step
  CHECK(ok->faults.random.kills == 2);
  const auto plan = "replan_every: 5\nfaults: {at: [{step: 7, ";
  CHECK(job_error(base + "faults: {random: {kills: 1}}").find("set replan_every") != std::string::npos);
  CHECK(job_error(base + plan + "kind: explode}]}").find("faults.at[0].kind must be kill, slow, pause, partition or corrupt") !=
        std::string::npos);
  CHECK(job_error(base + plan + "kind: kill, device: 9}]}").find("faults.at[0].device 9 is not in the job's devices") !=
        std::string::npos);
  CHECK(job_error(base + plan + "kind: pause}]}").find("faults.at[0].seconds") != std::string::npos);
  CHECK(config::parse_job(YAML::Load(base + plan + "kind: kill, moment: migration}]}"), "t")->faults.at[0].moment ==
        sim::fault_moment::migration);
  CHECK(job_error(base + plan + "kind: kill, moment: lunch}]}").find("faults.at[0].moment must be step, replan") != std::string::npos);
  CHECK(job_error(base + plan + "kind: slow, factor: 0.5, steps: 3, moment: sum}]}").find("only a kill or a pause waits") !=
        std::string::npos);
  CHECK(config::parse_job(YAML::Load(base + plan + "kind: pause, seconds: 3, moment: checkpoint}]}"), "t")->faults.at[0].moment ==
        sim::fault_moment::checkpoint);
  CHECK(config::parse_job(YAML::Load(base + plan + "kind: kill, moment: evaluation}]}"), "t")->faults.at[0].moment ==
        sim::fault_moment::evaluation);
  CHECK(job_error(base + plan + "kind: pause, seconds: 3, moment: migration}]}").find("a pause waits for a sum, a checkpoint or an evaluation") !=
        std::string::npos);
  CHECK(job_error(base + plan + "kind: slow, factor: 2, steps: 3}]}").find("factor in (0, 1]") != std::string::npos);
  CHECK(job_error(base + "replan_every: 5\nfaults: {at: [{step: 100, kind: kill}]}").find("faults.at[0].step must be in [0, 100)") !=
        std::string::npos);
  CHECK(job_error(base + "replan_every: 5\nfaults: {random: {kills: 1, from_step: 9, to_step: 3}}").find("faults.random") !=
        std::string::npos);
  CHECK(job_error(base + "replan_every: 5\nfaults: {kills: 1}").find("kills") != std::string::npos);  // typo: not under random
  CHECK(job_error(base + "step_deadline_s: -1").find("step_deadline_s") != std::string::npos);
  // The regret check: on unless `regret: false`.
  CHECK(config::parse_job(YAML::Load(base), "t")->regret);
  CHECK_FALSE(config::parse_job(YAML::Load(base + "regret: false\n"), "t")->regret);
  CHECK(job_error(base + "regret: maybe\n").find("regret") != std::string::npos);
  // Optimizers: AdamW takes PyTorch's weight decay 0.01 unless given; Nesterov needs SGD with momentum.
  const auto adamw = config::parse_job(YAML::Load(base + "optimizer: {kind: adamw, lr: 0.002}\n"), "t");
  REQUIRE(adamw);
  CHECK(adamw->optimizer == "adamw");
  CHECK(adamw->weight_decay == 0.01);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: adamw, weight_decay: 0}\n"), "t")->weight_decay == 0);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: adam}\n"), "t")->weight_decay == 0);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: sgd, momentum: 0.9, nesterov: true}\n"), "t")->nesterov);
  CHECK(job_error(base + "optimizer: {kind: adam, nesterov: true}\n").find("optimizer.nesterov") != std::string::npos);
  CHECK(job_error(base + "optimizer: {kind: sgd, momentum: 0, nesterov: true}\n").find("momentum > 0") != std::string::npos);
  CHECK(job_error(base + "optimizer: {kind: lamb}\n").find("adam, adamw or sgd") != std::string::npos);
  // Learning-rate schedules: each kind's own fields, checked and named.
  const auto cos = config::parse_job(YAML::Load(base + "optimizer: {lr: 0.01, schedule: {kind: cosine, warmup_steps: 5, min_lr: 0.001}}\n"), "t");
  REQUIRE(cos);
  CHECK(cos->schedule.kind == "cosine");
  CHECK(cos->schedule.warmup_steps == 5);
  CHECK(cos->schedule.steps == 0);  // the run's length, filled in when the job is prepared
  CHECK(cos->schedule.min_lr == 0.001);
  const auto stp = config::parse_job(YAML::Load(base + "optimizer: {schedule: {kind: step, step_size: 10, gamma: 0.5}}\n"), "t");
  REQUIRE(stp);
  CHECK(stp->schedule.step_size == 10);
  CHECK(stp->schedule.gamma == 0.5);
  CHECK(config::parse_job(YAML::Load(base + "optimizer: {kind: adam}\n"), "t")->schedule.kind == "constant");
  CHECK(job_error(base + "optimizer: {schedule: {kind: linear}}\n").find("constant, step or cosine") != std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: step, warmup_steps: 3}}\n").find("warmup_steps' belongs to kind cosine") !=
        std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: cosine, step_size: 3}}\n").find("step_size' belongs to kind step") !=
        std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: step, gamma: 2}}\n").find("gamma") != std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: step, step_size: 0}}\n").find("step_size") != std::string::npos);
  CHECK(job_error(base + "optimizer: {lr: 0.01, schedule: {kind: cosine, min_lr: 0.1}}\n").find("min_lr") != std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: cosine, warmup_steps: 10, steps: 10}}\n").find("below steps") != std::string::npos);
  CHECK(job_error(base + "optimizer: {schedule: {kind: cosine, warmup: 10}}\n").find("warmup") != std::string::npos);
  // The loss: cross-entropy, with label smoothing in [0, 1), or mse.
  CHECK(config::parse_job(YAML::Load(base), "t")->label_smoothing == 0);
  CHECK(config::parse_job(YAML::Load(base + "loss: {kind: cross_entropy, label_smoothing: 0.1}\n"), "t")->label_smoothing == 0.1);
  CHECK(job_error(base + "loss: {label_smoothing: 1}\n").find("loss.label_smoothing") != std::string::npos);
  // mse: the npy labels are regressed as reals (data::source::regression); nothing to smooth.
  CHECK_FALSE(config::parse_job(YAML::Load(base), "t")->data.regression);
  CHECK(config::parse_job(YAML::Load(base + "loss: {kind: mse}\n"), "t")->data.regression);
  CHECK(job_error(base + "loss: {kind: mse, label_smoothing: 0.1}\n").find("loss mse has none") != std::string::npos);
  CHECK_FALSE(config::parse_job(YAML::Load(base), "t")->bf16);
  CHECK(config::parse_job(YAML::Load(base + "precision: bf16\n"), "t")->bf16);
  CHECK_FALSE(config::parse_job(YAML::Load(base + "precision: fp32\n"), "t")->bf16);
  CHECK(job_error(base + "precision: fp16\n").find("field 'precision': 'fp16' is not supported") != std::string::npos);
  CHECK(job_error(base + "loss: {kind: huber}\n").find("'huber' is not supported") != std::string::npos);
  CHECK(job_error(base + "loss: {smoothing: 0.1}\n").find("smoothing") != std::string::npos);
}

TEST_CASE("job files: sizes past what any run needs are named, and the largest allowed pass", "[unit][config]") {
  const std::string model = "model: cnn\nsteps: 10\n";
  // Devices: at most 4096 in a training job (100,000 in one entry was taken before).
  CHECK(job_error(model + "devices: [{count: 4096}]").empty());
  CHECK(job_error(model + "devices: [{count: 100000}]").find("lists 100000 devices; a training job takes at most 4096") !=
        std::string::npos);
  CHECK(job_error(model + "devices: [{count: 4000}, {count: 97}]").find("lists 4097 devices") != std::string::npos);
  // A cluster (scenarios too): 100,000 devices in all, and ids that cannot overflow.
  CHECK(parse_error("devices: [{count: 100000}]").empty());
  CHECK(parse_error("devices: [{count: 100000}, {count: 1}]").find("more than 100000 devices in all") != std::string::npos);
  CHECK(parse_error("devices: [{id: 1999999000, count: 2000}]").find("'devices[0].id' must be in 0..1000000") != std::string::npos);
  CHECK(parse_error("devices: [{id: -5}]").find("'devices[0].id' must be in 0..1000000") != std::string::npos);
  const std::string base = model + "devices: [{id: 0}, {id: 1}]\nreplan_every: 5\n";
  CHECK(job_error(base + "faults: {random: {kills: 100000}}").empty());
  CHECK(job_error(base + "faults: {random: {kills: 100001}}").find("counts in 0..100000") != std::string::npos);
  CHECK(job_error(base + "faults: {random: {slows: 2000000000}}").find("counts in 0..100000") != std::string::npos);
  CHECK(job_error(base + "faults: {random: {pauses: 1, pause_s: 1e300}}").find("pause_s in (0, 3600]") != std::string::npos);
  CHECK(job_error(base + "step_deadline_s: 1e300").find("'step_deadline_s' must be in 0..86400") != std::string::npos);
  CHECK(job_error(base + "step_deadline_s: 86400").empty());
  const std::string no_steps = "model: cnn\ndevices: [{id: 0}]\n";
  CHECK(job_error(no_steps + "epochs: 1e300").find("'epochs' must be in (0, 1000000]") != std::string::npos);
  CHECK(job_error(no_steps + "epochs: 1000000").empty());
  CHECK(job_error(no_steps + "steps: 1500000000").find("'steps' must be in 0..1000000000") != std::string::npos);
}

TEST_CASE("job files: without 'devices', a pool of ids that nodes describe, and what such a job cannot say", "[unit][config]") {
  const std::string base = "model: cnn\nsteps: 10\nemulate: false\nreplan_every: 5\n";
  auto pool = config::parse_job(YAML::Load(base), "t");
  REQUIRE(pool);
  CHECK(pool->cluster.described);
  const auto& devices = pool->cluster.cluster.devices;
  REQUIRE(devices.size() == 64);  // the documented default
  CHECK((devices.front().id == 0 && devices.back().id == 63));
  CHECK((devices[5].available && devices[5].price_per_s == 0 && devices[5].power_w == 0 && devices[5].speed == 1));
  auto sized = config::parse_job(YAML::Load(base + "max_devices: 3"), "t");
  REQUIRE(sized);
  CHECK(sized->cluster.cluster.devices.size() == 3);
  CHECK_FALSE(config::parse_job(YAML::Load(base + "devices: [{id: 0}]"), "t")->cluster.described);
  CHECK(job_error(base + "max_devices: 0").find("'max_devices' must be in 1..4096") != std::string::npos);
  CHECK(job_error(base + "max_devices: 4097").find("'max_devices' must be in 1..4096") != std::string::npos);
  CHECK(job_error(base + "max_devices: 4\ndevices: [{id: 0}]").find("'max_devices' sizes the pool of a job without 'devices'") !=
        std::string::npos);
  // Emulated devices need their speeds; without re-planning nothing plans for those that join.
  CHECK(job_error("model: cnn\nsteps: 10\nreplan_every: 5\n").find("'devices' is required with emulate: true") != std::string::npos);
  CHECK(job_error("model: cnn\nsteps: 10\nemulate: false\n").find("set replan_every") != std::string::npos);
  CHECK(job_error(base + "budget: {cost_per_slot: 1}").find("no prices or power to budget") != std::string::npos);
  CHECK(job_error(base + "plan: [{devices: [0], splits: [0, 4], share: 64}]").find("'plan' names devices") != std::string::npos);
}

TEST_CASE("scenario files: the controller's hysteresis, off unless asked, and its lifetime checked", "[unit][config]") {
  const std::string base = "model: resnet50\ndevices: [{}, {}]\n";
  auto plain = config::parse_scenario(YAML::Load(base), "s");
  REQUIRE(plain);
  CHECK_FALSE(plain->hysteresis);
  auto on = config::parse_scenario(YAML::Load(base + "hysteresis: true\nplan_lifetime_slots: 4\n"), "s");
  REQUIRE(on);
  CHECK(on->hysteresis);
  CHECK(on->plan_lifetime_slots == 4);
  for (const char* bad : {"plan_lifetime_slots: 0\n", "plan_lifetime_slots: soon\n", "hysteresis: maybe\n"}) {
    auto r = config::parse_scenario(YAML::Load(base + bad), "s");
    REQUIRE_FALSE(r);
    CHECK(r.err().message.find(std::string(bad).substr(0, std::string(bad).find(':'))) != std::string::npos);
  }
}
