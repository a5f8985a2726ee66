#include "training/verify.hpp"

#include <cstdio>
#include <fstream>

#include "data/sampler.hpp"
#include "training/checkpoint_files.hpp"

namespace dynapar::training {

reference_check check_against_reference(const prepared_job& p, std::int64_t steps, const std::vector<model::layer_copy>& trained,
                                        const std::vector<std::vector<train_outcome::replica_hash>>& replicas) {
  model::reference ref(*p.model, p.settings.optimizer, p.reference_place);
  data::global_sampler sampler(p.train_set.size(), p.settings.batch, p.job.seed);
  const int micro = p.job.exact ? p.job.cluster.planner.micro_batch : 0;
  for (std::int64_t t = 0; t < steps; ++t) ref.step(p.train_set, sampler.step_samples(t), micro, t);
  reference_check out;
  out.max_rel_diff = model::max_rel_diff(trained, ref.layers());
  out.reference_accuracy = model::accuracy(ref.layers(), p.test_set);
  out.tolerance = p.job.verify_tolerance;
  // Bits are promised on the reference's place only, and only where no tolerance is allowed.
  if (p.job.exact && out.tolerance == 0) {
    const auto want = model::state_hashes(ref.layers());
    for (std::size_t l = 0; l < replicas.size() && l < want.size(); ++l)
      for (const auto& r : replicas[l]) {
        if (r.place != p.reference_place) continue;
        ++out.replicas_checked;
        if (r.hash != want[l])
          out.replicas_differing.push_back("layer " + std::to_string(l) + " (" + model::layer_name(*p.model, static_cast<int>(l)) +
                                           ") on device " + std::to_string(r.device));
      }
  }
  return out;
}

namespace {
std::string hex(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
}  // namespace

nlohmann::json layer_hashes_json(const prepared_job& p, std::int64_t steps, const std::vector<std::uint64_t>& hashes) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto h : hashes) layers.push_back(hex(h));
  return {{"job", p.job.name}, {"fingerprint", job_fingerprint(p)}, {"steps", steps}, {"layers", layers}};
}

result<nlohmann::json> other_run(const std::string& dir, const prepared_job& p, std::int64_t steps) {
  const std::string file = dir + "/" + layer_hashes_file;
  if (!p.job.exact)
    return make_error("bad_verify", "--verify-against compares bits, and an `exact: false` job's sums depend on the plan: use --verify");
  std::ifstream in(file);
  if (!in) return make_error("bad_verify", file + ": cannot be read (a run of this job with --out " + dir + " writes it)");
  nlohmann::json other;
  try {
    other = nlohmann::json::parse(in);
    if (!other.at("layers").is_array()) throw std::runtime_error("no list of layers");
    for (const auto& h : other.at("layers")) h.get<std::string>();
  } catch (const std::exception& e) {
    return make_error("bad_verify", file + ": not a layer_hashes.json a run wrote (" + std::string(e.what()).substr(0, 120) + ")");
  }
  const auto mine = job_fingerprint(p);
  for (const auto& [key, value] : mine.items())
    if (!other["fingerprint"].contains(key) || other["fingerprint"][key] != value)
      return make_error("bad_verify", file + ": that run trained another job (" + key + " differs), so its layers are not this job's");
  if (other["fingerprint"].size() != mine.size())
    return make_error("bad_verify", file + ": that run trained another job (its fingerprint has other fields)");
  if (other.value("steps", std::int64_t{-1}) != steps)
    return make_error("bad_verify", file + ": that run trained " + other["steps"].dump() + " steps, this one " + std::to_string(steps));
  return other;
}

std::vector<int> layers_differing(const nlohmann::json& mine, const nlohmann::json& other) {
  const auto& a = mine.at("layers");
  const auto& b = other.at("layers");
  std::vector<int> out;
  for (std::size_t l = 0; l < std::max(a.size(), b.size()); ++l)
    if (l >= a.size() || l >= b.size() || a[l] != b[l]) out.push_back(static_cast<int>(l));
  return out;
}

}  // namespace dynapar::training
