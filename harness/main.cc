// The collcheck command line.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <string>

#include "harness/cli_util.h"
#include "harness/sweep.h"

namespace {

constexpr int kMaxThreadRanks = 512;

void add_sweep(CLI::App& app, collcheck::SweepOptions& o, std::string& b, std::string& e, std::string& d,
               std::string& op, std::string& algo, std::string& count, std::string& data, int& check) {
  auto* s = app.add_subcommand("sweep", "Time and check all-reduce over sizes x dtypes x ops x algorithms "
                                        "(nccl-tests style table)");
  s->add_option("-b,--minbytes", b, "smallest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-e,--maxbytes", e, "largest size in bytes (K/M/G suffixes)")->capture_default_str();
  s->add_option("-f,--stepfactor", o.factor, "multiply the size by this factor each step")->capture_default_str();
  s->add_option("-N,--count", count, "run exactly this many elements instead of -b/-e");
  s->add_option("-d,--datatype", d, "dtype, comma list, or all")->capture_default_str();
  s->add_option("-o,--op", op, "sum, prod, max, min, avg, premulsum, comma list, or all")->capture_default_str();
  s->add_option("-n,--iters", o.iters, "timed iterations per row")->capture_default_str();
  s->add_option("-w,--warmup_iters", o.warmup, "untimed iterations before timing")->capture_default_str();
  s->add_option("-c,--check", check, "check results against the oracle (0 or 1)")->capture_default_str();
  s->add_option("--ranks", o.ranks, "world size (ranks as threads)")->capture_default_str();
  s->add_option("--algo", algo, "ring, tree, dbtree, comma list, or all")->capture_default_str();
  s->add_flag("--inplace", o.inplace, "in-place calls (send buffer == recv buffer)");
  s->add_option("--seed", o.seed, "seed of the input data")->capture_default_str();
  s->add_option("--data", data, "input data: exact, random or mixed")->capture_default_str();
  s->add_option("--scalar", o.scalar, "pre-multiplier of premulsum, converted to the element type")
      ->capture_default_str();
  s->add_flag("--no-memcpy-peer", [&o](int64_t) { o.memcpy_peer = false; },
              "skip the memcpy bandwidth peer printed after the table");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collcheck: a verification and fault-injection harness for All-Reduce"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the collective libraries compiled in");

  collcheck::SweepOptions sweep;
  std::string b = "1K", e = "256K", d = "float32", op = "sum", algo = "ring", count, data = "mixed";
  int check = 1;
  add_sweep(app, sweep, b, e, d, op, algo, count, data, check);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& ex) {
    return app.exit(ex);
  } catch (const CLI::CallForAllHelp& ex) {
    return app.exit(ex);
  } catch (const CLI::ParseError& ex) {
    std::fprintf(stderr, "collcheck: error: %s (see --help)\n", ex.what());
    return 2;
  }

  if (version) {
    fmt::print("collcheck {}\n", COLLCHECK_VERSION);
    fmt::print("implementations: ring, tree, dbtree (reference, CPU)\n");
    return 0;
  }

  try {
    if (app.got_subcommand("sweep")) {
      sweep.min_bytes = collcheck::parse_size(b, "-b/--minbytes");
      sweep.max_bytes = collcheck::parse_size(e, "-e/--maxbytes");
      if (!count.empty()) sweep.count = collcheck::parse_count(count, "-N/--count");
      if (sweep.min_bytes > sweep.max_bytes)
        throw collcheck::UsageError(fmt::format("-b/--minbytes ({}) must not exceed -e/--maxbytes ({})",
                                                sweep.min_bytes, sweep.max_bytes));
      if (!(sweep.factor > 1.0))
        throw collcheck::UsageError(fmt::format("-f/--stepfactor must be > 1, got {}", sweep.factor));
      sweep.dtypes = collcheck::parse_dtype_list(d, "-d/--datatype");
      sweep.ops = collcheck::parse_op_list(op, "-o/--op");
      sweep.algos = collcheck::parse_algo_list(algo, "--algo");
      if (sweep.ranks < 1 || sweep.ranks > kMaxThreadRanks)
        throw collcheck::UsageError(fmt::format("--ranks must be between 1 and {} for the thread world, got {}",
                                                kMaxThreadRanks, sweep.ranks));
      if (sweep.iters < 1) throw collcheck::UsageError(fmt::format("-n/--iters must be >= 1, got {}", sweep.iters));
      if (sweep.warmup < 0)
        throw collcheck::UsageError(fmt::format("-w/--warmup_iters must be >= 0, got {}", sweep.warmup));
      if (check != 0 && check != 1) throw collcheck::UsageError(fmt::format("-c/--check must be 0 or 1, got {}", check));
      sweep.check = check == 1;
      auto dc = collcheck::parse_data_class(data);
      if (!dc) throw collcheck::UsageError(fmt::format("unknown --data '{}'; allowed: exact, random, mixed", data));
      sweep.data = *dc;
      return collcheck::run_sweep(sweep, stdout).exit_code();
    }
    std::fprintf(stderr, "collcheck: error: no subcommand given; allowed: sweep (see --help)\n");
    return 2;
  } catch (const collcheck::UsageError& ex) {
    std::fprintf(stderr, "collcheck: error: %s\n", ex.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "collcheck: error: out of memory for the requested sizes and --ranks\n");
    return 2;
  }
}
