// dynapar: the command line. Parses flags (CLI11), sets up logging, runs one subcommand.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.hpp"
#include "common/allocator.hpp"
#include "common/memory_cap.hpp"
#include "logging/logging.hpp"

int main(int argc, char** argv) {
  using namespace dynapar;
  // OpenBLAS sizes its thread pool when it is loaded, before main: with a device actor per
  // thread on few cores, its own threads only fight them. Re-run once with one BLAS thread
  // unless the user chose otherwise.
  if (!std::getenv("OPENBLAS_NUM_THREADS")) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on as we are
  }
  // A file over the process's size limit (ulimit -f) is a write error the caller reports (a
  // checkpoint not written, the run going on), not a signal that kills the run.
  std::signal(SIGXFSZ, SIG_IGN);
  // Keep freed tensor memory for the next step rather than fault fresh pages in again
  // (runtime/common/allocator.hpp); node processes started by launch inherit the variable.
  const auto alloc = allocator_options_from_env(std::getenv("DYNAPAR_MALLOC_KEEP_MB"));
  if (!alloc) {
    std::cerr << "dynapar: " << alloc.err().message << "\n";
    return cli::exit_usage;
  }
  if (auto s = keep_freed_memory(*alloc); !s) std::cerr << "dynapar: warning: " << s.err().message << "\n";
  CLI::App app{"dynapar: joint dynamic data and model parallelism over heterogeneous devices"};
  app.require_subcommand(1);
  std::optional<std::string> log_level;
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off (default: $DYNAPAR_LOG or info)");
  std::optional<long> max_rss_mb;
  app.add_option("--max-rss-mb", max_rss_mb,
                 "End this process, and each process it starts, once its resident memory is over N MB, as the kernel's "
                 "out-of-memory killer would (sets DYNAPAR_MAX_RSS_MB; docs/DISTRIBUTED.md)")
      ->check(CLI::Range(1L, 10'000'000L));
  std::optional<std::string> offload;
  app.add_option("--offload-optimizer", offload,
                 "Keep Adam's moments between steps in a file in DIR (its local disk) instead of in memory, in this process "
                 "and each process it starts (sets DYNAPAR_OFFLOAD_OPTIMIZER; docs/RUNTIME.md)");
  cli::runner run;
  auto* version = app.add_subcommand("version", "Print the version");
  version->callback([&] { run = [] { std::cout << "dynapar " << DYNAPAR_VERSION << "\n"; return 0; }; });
  cli::add_plan(app, run);
  cli::add_bench(app, run);
  cli::add_simulate(app, run);
  cli::add_train(app, run);
  cli::add_distributed(app, run);
  cli::add_chaos(app, run);
  cli::add_report(app, run);
  cli::add_keygen(app, run);
  // CLI11 would only say that a subcommand is required: name the word it did not know.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto* sub : app.get_subcommands({})) known = known || sub->get_name() == argv[1];
    if (!known) {
      std::cerr << "dynapar: unknown subcommand '" << argv[1] << "'\nRun 'dynapar --help' for usage.\n";
      return cli::exit_usage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "dynapar: " << e.what() << "\nRun 'dynapar --help' for usage.\n";
    return cli::exit_usage;
  }
  const char* env = std::getenv("DYNAPAR_LOG");
  if (auto s = logging::setup(log_level, env ? std::optional<std::string>(env) : std::nullopt); !s) {
    std::cerr << "dynapar: " << s.err().message << "\n";
    return cli::exit_usage;
  }
  if (!run) return cli::exit_usage;
  // Before the subcommand runs, so that the processes it starts (launch's nodes) inherit it.
  if (max_rss_mb) setenv("DYNAPAR_MAX_RSS_MB", std::to_string(*max_rss_mb).c_str(), 1);
  if (offload) setenv("DYNAPAR_OFFLOAD_OPTIMIZER", offload->c_str(), 1);
  const auto cap = rss_cap_from_env(std::getenv("DYNAPAR_MAX_RSS_MB"));
  if (!cap) {
    std::cerr << "dynapar: " << cap.err().message << "\n";
    return cli::exit_usage;
  }
  std::unique_ptr<rss_watch> watch;
  if (*cap > 0) {
    logging::get("main")->info("resident memory capped at {:.0f} MB", *cap);
    watch = std::make_unique<rss_watch>(rss_watch::options{*cap, std::chrono::milliseconds(20), {}, [cap = *cap](double rss) {
      std::fprintf(stderr, "dynapar: over its memory cap: %.1f MB resident, over --max-rss-mb %.0f (DYNAPAR_MAX_RSS_MB); exiting\n", rss, cap);
      std::fflush(stderr);
      std::_Exit(cli::exit_failed);  // as a process the kernel killed: nothing more runs
    }});
  }
  // Errors are values everywhere below; one a library throws past them (LibTorch on a model
  // that fails at run time) still ends the run with its message, not with an abort.
  try {
    return run();
  } catch (const std::exception& e) {
    std::cerr << "dynapar: failed: " << e.what() << "\n";
    return cli::exit_failed;
  }
}
