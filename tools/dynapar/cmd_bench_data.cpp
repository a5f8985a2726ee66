// `dynapar bench data JOB`: how fast the job's training set is read as a device reads it
// (model::inputs, micro-batch by micro-batch, augmentation drawn), in samples a second, and
// how long loading it took (listing, and reading or finding in the index each file's digest).
// tools/bench/loader_rate.sh puts PyTorch's DataLoader on the same folder beside it.
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "config/job_file.hpp"
#include "model/api.hpp"

namespace dynapar::cli {
namespace {

struct data_bench_options {
  std::string job;
  int samples = 2000;
  int micro_batch = 8;
  bool json = false;
};

int bench_data(const data_bench_options& o) {
  model::set_threads(1);
  auto job = config::load_job_file(o.job);
  if (!job) return report(job.err());
  stopwatch load_sw;
  auto d = model::load_data(job->data, true);
  if (!d) return report(d.err());
  const double load_s = load_sw.seconds();
  const int n = std::min(o.samples, d->size());
  std::vector<int> order(static_cast<std::size_t>(d->size()));
  for (int i = 0; i < d->size(); ++i) order[static_cast<std::size_t>(i)] = static_cast<int>((static_cast<std::int64_t>(i) * 7919) % d->size());
  stopwatch sw;
  try {
    for (int lo = 0; lo < n; lo += o.micro_batch) (void)model::inputs(*d, order, lo, std::min(n, lo + o.micro_batch), lo / o.micro_batch);
  } catch (const std::exception& e) {
    return report(make_error("bad_data", e.what()));
  }
  const double rate = n / sw.seconds();
  nlohmann::json out = {{"job", o.job}, {"kind", job->data.kind}, {"samples", n}, {"data_set", d->size()}, {"micro_batch", o.micro_batch},
                        {"samples_per_s", rate}, {"load_s", load_s}, {"path", job->data.path}, {"rows", d->rows}, {"cols", d->cols},
                        {"channels", d->channels}, {"mean", job->data.mean}, {"std", job->data.std_dev}};
  if (o.json) std::cout << out.dump() << "\n";
  else std::cout << "read " << n << " of " << d->size() << " samples (" << job->data.kind << ") in micro-batches of " << o.micro_batch << ": "
                 << static_cast<long>(rate) << " samples/s; the set loaded in " << load_s << " s\n";
  return exit_ok;
}

}  // namespace

void add_bench_data(CLI::App& bench, runner& run) {
  auto o = std::make_shared<data_bench_options>();
  auto* sub = bench.add_subcommand("data", "Samples a second read from a job's training set as its devices read them");
  sub->add_option("job", o->job, "Job file (its data: map)")->required();
  sub->add_option("--samples", o->samples, "Samples to read (default 2000; at most the set's)")->check(CLI::Range(1, 100000000));
  sub->add_option("--micro-batch", o->micro_batch, "Samples read together (default 8)")->check(CLI::Range(1, 4096));
  sub->add_flag("--json", o->json, "Print one JSON object");
  sub->callback([o, &run] { run = [o] { return bench_data(*o); }; });
}

}  // namespace dynapar::cli
