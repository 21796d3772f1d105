// collcheck faults: every nemesis injected into a small training step (the
// fault table), or the detection property over random scenarios (--random).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>

#include <unistd.h>

#include <filesystem>

#include "faults/nemesis.h"
#include "harness/cli/commands.h"
#include "harness/report/diagnosis_text.h"
#include "harness/report/timeline.h"
#include "harness/peers/peer_registry.h"
#include "harness/world/mpi_world.h"
#include "impl/algorithm.h"
#include "properties/detection.h"
#include "properties/fault_table.h"
#include "properties/verify.h"

namespace collcheck::cli {

void add_faults(CLI::App& app, FaultsFlags& f) {
  auto* fa = app.add_subcommand("faults", "Inject every nemesis into a small training-step scenario and print fault, "
                                          "detected, diagnosis and time to diagnosis");
  fa->add_option("--impl", f.impl, "implementation: " + algorithm_choices() + " or plugin:<path.so>")->capture_default_str();
  fa->add_option("--ranks", f.ranks, "world size (default: 4 as threads; every process in the MPI world)");
  fa->add_option("--mode", f.mode, "guarded, unguarded or both")->capture_default_str();
  fa->add_option("--world", f.world, "threads (the default) or mpi (under mpirun; every process is a rank)")
      ->capture_default_str();
  fa->add_option("--random", f.random,
                 "run the detection property instead: this many random scenarios, each with a random fault");
  fa->add_option("--seed", f.seed, "seed of --random")->capture_default_str();
  fa->add_option("--keep-dumps", f.keep_dumps,
                 "keep the flight-recorder dumps of a row that is not diagnosed as injected here, one folder per row "
                 "(default: every row's dumps are removed)");
  add_progress_flag(fa, f.progress);
  add_report_flag(fa, f.report);
}

namespace {

ReportCase detection_verdict(size_t i, const collcheck::DetectionCase& c, const collcheck::DetectionOutcome& o) {
  const std::string fault = c.fault ? c.fault->kind : "none (clean)";
  ReportCase v{fmt::format("case {}: {} ({})", i + 1, fault, c.guarded ? "guarded" : "unguarded"),
               o.ok ? ReportCase::Status::Passed : ReportCase::Status::Failed, o.ok ? "" : o.why, "", o.seconds};
  if (!o.ok) {
    for (const auto& d : o.result.diagnoses) v.detail += collcheck::format_diagnosis(d) + "\n";
    v.detail += "the case as a scenario (replay it with collcheck replay):\n" + collcheck::scenario_to_yaml(c.scenario());
  }
  return v;
}

// A case whose diagnosis was not the fault injected: what was found, and the
// case as a scenario file that `collcheck replay` reruns.
void print_missed_case(size_t i, const collcheck::DetectionCase& c, const collcheck::DetectionOutcome& o) {
  fmt::print("case {}: {} ({}): {}\n", i + 1, c.fault ? c.fault->kind : "none (clean)", c.guarded ? "guarded" : "unguarded",
             o.why);
  for (const auto& d : o.result.diagnoses) fmt::print("  {}\n", collcheck::format_diagnosis(d));
  fmt::print("  the case as a scenario (replay it with collcheck replay):\n");
  std::string yaml = collcheck::scenario_to_yaml(c.scenario());
  for (size_t a = 0; a < yaml.size();) {
    const size_t b = std::min(yaml.find('\n', a), yaml.size());
    fmt::print("    {}\n", std::string_view(yaml).substr(a, b - a));
    a = b + 1;
  }
}

// The detection property as a command: `random` generated clean scenarios
// with a random fault each, replayed in this world (every MPI rank generates
// the same cases from the seed), each diagnosis compared with the fault.
int run_detection_command(FaultsFlags& f, int p, uint64_t seed, const Session& session) {
  collcheck::MpiWorld* mpi = session.mpi();
  const bool root = session.root();
  if (root)
    fmt::print("collcheck faults --random {}: the detection property, {} ranks {}, seed {:#x}\n", f.random, p,
               session.how(), seed);
  const auto start = Clock::now();
  Report rep;
  rep.command = "faults";
  rep.suite = fmt::format("collcheck faults --random {} ({} ranks)", f.random, p);
  rep.properties = {{"seed", fmt::format("{:#x}", seed)}, {"world", session.name()}};
  rc::Random base(seed);
  const auto gen = collcheck::gen_detection_case(p, p);
  size_t missed = 0;
  double worst_over = 0;
  std::map<std::string, std::pair<size_t, size_t>> by_fault;  // fault -> (diagnosed as injected, drawn)
  std::optional<collcheck::Progress> progress;
  if (const auto st = progress_for(f.progress, session); st != collcheck::ProgressStyle::Off) {
    progress.emplace("faults", "cases", st);
    progress->count(0, f.random);
  }
  for (size_t i = 0; i < f.random; ++i) {
    if (progress) progress->count(i, f.random);
    const rc::Random ri = base.split();
    const collcheck::DetectionCase c = gen(ri, static_cast<int>(i % (rc::kNominalSize + 1))).value();
    const auto replay = [&](const collcheck::Scenario& s) {
      return replay_here(s, {}, session);
    };
    const collcheck::DetectionOutcome o = collcheck::check_detection(c, replay, /*rerun_if_slow=*/mpi == nullptr);
    if (!root) continue;
    worst_over = std::max(worst_over, o.seconds - o.limit_s);
    const std::string fault = c.fault ? c.fault->kind : "none (clean)";
    auto& tally = by_fault[fault];
    tally.first += o.ok ? 1 : 0;
    ++tally.second;
    rep.cases.push_back(detection_verdict(i, c, o));
    if (!o.ok) {
      ++missed;
      if (progress) progress->clear();
      print_missed_case(i, c, o);
    }
  }
  progress.reset();
  int code = missed ? 1 : 0;
  if (root) {
    fmt::print("{} of {} cases diagnosed as injected (no miss, no false alarm: {}); worst time beyond the limit: "
               "{:.3f} s\n",
               f.random - missed, f.random, missed ? "NO" : "yes", worst_over);
    std::vector<std::string> tallies;
    for (const auto& [fault, t] : by_fault) tallies.push_back(fmt::format("{} {}/{}", fault, t.first, t.second));
    fmt::print("by fault (diagnosed as injected/drawn): {}\n", fmt::join(tallies, ", "));
    std::fflush(stdout);
    rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    code = finish_reports(f.report, rep, code);
  }
  return session.agree_exit_code(code);
}

}  // namespace

int run_faults_command(FaultsFlags& f, const Session& session) {
  using collcheck::UsageError;
  collcheck::MpiWorld* mpi = session.mpi();
  const int ranks = f.ranks == -1 ? (session.max_ranks(4)) : f.ranks;
  if (mpi && ranks != mpi->size())
    throw UsageError(fmt::format("--ranks is {}, but mpirun started {} processes; in the MPI world every process is a "
                                 "rank", ranks, mpi->size()));
  if (ranks < 2 || ranks > kMaxThreadRanks)
    throw UsageError(fmt::format("--ranks must be between 2 and {} for the fault table, got {}", kMaxThreadRanks, ranks));
  if (f.mode != "both" && f.mode != "guarded" && f.mode != "unguarded")
    throw UsageError(fmt::format("--mode must be guarded, unguarded or both, got '{}'", f.mode));
  try {
    (void)collcheck::make_implementation(f.impl);
  } catch (const collcheck::ImplementationError& e) {
    throw UsageError(fmt::format("--impl: {}", e.what()));
  }
  if (f.random > 0) {
    const uint64_t seed = parse_seed(f.seed, "--seed");
    if (ranks > 8) throw UsageError(fmt::format("--random draws worlds of at most 8 ranks, got {}", ranks));
    return run_detection_command(f, ranks, seed, session);
  }
  collcheck::FaultTableOptions o;
  o.ranks = ranks;
  o.impl = f.impl;
  o.guarded = f.mode != "unguarded";
  o.unguarded = f.mode != "guarded";
  o.keep_dumps = f.keep_dumps;
  if (!mpi) o.should_stop = f.should_stop;
  o.root = session.root();
  Report rep;
  int code = fault_table_job(o, rep, session);
  if (o.root) code = finish_reports(f.report, rep, code);
  return session.agree_exit_code(code);  // every rank exits with rank 0's verdict
}

int fault_table_job(const collcheck::FaultTableOptions& o, Report& rep, const Session& session) {
  const collcheck::Scenario base = collcheck::fault_table_scenario(o.ranks, o.impl);
  const auto start = Clock::now();
  rep.command = "faults";
  rep.suite = fmt::format("collcheck faults {} ({} ranks)", o.impl, o.ranks);
  rep.properties = {{"scenario", base.name}, {"world", session.name()},
                    {"deadline per call (s)", fmt::format("{:.3g}", base.deadline_s)}};
  if (o.root) {
    fmt::print("collcheck faults: impl {}, {} ranks {}, deadline {:.3g} s per call\n", o.impl, o.ranks,
               session.how(), base.deadline_s);
    fmt::print("scenario: {}\n\n", base.name);
    fmt::print("{:<18} {:<10} {:<9} {:>12} {:>9}  {}\n", "fault", "mode", "detected", "diagnosed at", "run took",
               "diagnosis");
    std::fflush(stdout);
  }
  const auto rows = collcheck::run_fault_table(o, [&](const collcheck::Scenario& s, const collcheck::ReplayOptions& ro) { return replay_here(s, ro, session); }, [](const collcheck::FaultRow& row) {
    if (!row.run) return;
    const char* mode = row.guarded ? "guarded" : "unguarded";
    fmt::print("{:<18} {:<10} {:<9} {:>11.3f}s {:>8.3f}s  {}\n", row.fault, mode, row.ok ? "yes" : "NO", row.diagnosed_at,
               row.seconds, row.diagnosis.substr(0, 150));
    if (!row.ok) fmt::print("{:<18} {:<10} {}\n", "", "", row.why);
    if (row.own_deadline)
      fmt::print("{:<18} {:<10} (deadline {:.2g} s per call for this fault: its own delays need it)\n", "", "",
                 row.deadline_s);
    std::fflush(stdout);
  });
  if (!o.root) return 0;
  collcheck::add_fault_rows(rep, rows);
  bool all = true;
  size_t not_run = 0;
  for (const auto& row : rows) {
    all = all && (row.ok || !row.run);
    not_run += row.run ? 0 : 1;
  }
  // A table cut short is no verdict on the rows it did not run.
  const int code = !all ? 1 : not_run > 0 ? collcheck::kExitHarnessError : 0;
  if (not_run > 0) fmt::print("{} row(s) not run: the budget ran out before them\n", not_run);
  fmt::print("\n{}\n", !all          ? "SOME FAULTS WERE NOT DIAGNOSED AS INJECTED"
                        : not_run > 0 ? "NO VERDICT on the rows not run"
                                      : "every fault detected and named");
  std::fflush(stdout);
  rep.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return code;
}

}  // namespace collcheck::cli
