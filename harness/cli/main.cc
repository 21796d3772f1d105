// The collcheck command line: parses, starts the world the command asked
// for, and runs the command (one file each: harness/cli/<name>_command.cc).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>

#include "harness/cli/commands.h"
#include "harness/model/heap.h"
#include "harness/model/user_values.h"
#include "harness/session/supervisor.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/peer_registry.h"
#include "harness/world/crash_handler.h"
#include "harness/world/mpi_world.h"
#include "harness/world/sim_watch.h"

using namespace collcheck::cli;
using collcheck::UsageError;

namespace {

// Every command's flags, filled by CLI11.
struct Commands {
  SweepFlags sweep;
  VerifyFlags verify;
  ReplayFlags replay;
  FaultsFlags faults;
  AnalyzeFlags analyze;
  RunFlags run;
  SoakFlags soak;
  GateFlags gate;
};

void add_commands(CLI::App& app, Commands& c) {
  add_sweep(app, c.sweep);
  add_verify(app, c.verify);
  add_replay(app, c.replay);
  add_faults(app, c.faults);
  add_analyze(app, c.analyze);
  add_run(app, c.run);
  add_soak(app, c.soak);
  add_gate(app, c.gate);
  // An empty value is bad input, never the same as leaving the flag out
  // (--seed "" drew a random seed, sweep -N '' ran the default sizes).
  const CLI::Validator non_empty(
      [](std::string& v) { return v.empty() ? std::string("needs a value, and an empty one is not a value") : std::string(); },
      "", "non-empty");
  std::vector<CLI::App*> apps{&app};
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) apps.push_back(sub);
  for (CLI::App* a : apps)
    for (CLI::Option* opt : a->get_options())
      if (opt->get_expected_min() > 0) opt->check(non_empty);
}

// Two outputs, or an output and an input, that name one file: refused
// before anything runs (every MPI process finds the same).
std::optional<int> refuse_shared_paths(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands()) {
    std::vector<std::tuple<std::string, std::string, bool>> paths;
    for (CLI::Option* opt : sub->get_options()) {
      const std::string name = opt->get_name();
      static const char* const kInputs[] = {"--baseline", "--candidate", "--plan"};
      static const char* const kOutputs[] = {"--results", "--json", "--junit", "--markdown", "--emit-scenario",
                                             "--metrics-textfile", "--report"};
      const bool input = std::find(std::begin(kInputs), std::end(kInputs), name) != std::end(kInputs);
      const bool output = std::find(std::begin(kOutputs), std::end(kOutputs), name) != std::end(kOutputs);
      if (!input && !output) continue;
      for (const std::string& v : opt->results())
        paths.emplace_back(name == "--report" ? "--report " + v : name,
                           name == "--report" && v.find('=') != std::string::npos ? v.substr(v.find('=') + 1) : v,
                           output);
    }
    try {
      collcheck::check_distinct_paths(paths);
    } catch (const UsageError& ex) {
      std::fprintf(stderr, "collcheck: error: %s\n", ex.what());
      return 2;
    }
  }
  return std::nullopt;
}

// The world the command run asked for: its --world and --world sim's flags,
// and whether its default is the simulated world. A command with no --world
// (analyze, gate) runs as threads.
collcheck::WorldRequest world_asked(CLI::App& app, const Commands& c) {
  const std::tuple<const char*, const std::string*, const SimFlags*, bool> kTable[] = {
      {"sweep", &c.sweep.world, &c.sweep.sim, false},    {"soak", &c.soak.world, &c.soak.sim, false},
      {"verify", &c.verify.world, &c.verify.sim, true},  {"replay", &c.replay.world, &c.replay.sim, true},
      {"faults", &c.faults.world, &c.faults.sim, true}};
  for (const auto& [name, world, sim, sim_default] : kTable)
    if (app.got_subcommand(name)) return {*world, sim_default, sim->schedule, sim->schedule_seed, sim->link_model};
  return {};
}

// The world asked for, checked, then made once: the session every command is
// handed. Every process parsed the same command line, so they all reach
// here, or all failed before alike. nullopt: started; else the exit code.
std::optional<int> start_session(CLI::App& app, Commands& c, int& argc, char**& argv, collcheck::Session& session) {
  const collcheck::WorldRequest w = world_asked(app, c);
  std::string warning;
  try {
    // Before MPI starts, in every world alike (a bad value is bad input anywhere).
    if (app.got_subcommand("verify")) collcheck::choose_mpi_allreduce_algorithm(c.verify.job.mpi_algo);
    session = collcheck::Session::open(w, &argc, &argv, warning);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "collcheck: error: %s\n", ex.what());
    return 2;
  }
  if (!warning.empty()) std::fprintf(stderr, "collcheck: warning: %s\n", warning.c_str());
  if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); w.world != "mpi" && n && std::atoi(n) > 1)
    std::fprintf(stderr, "collcheck: warning: started by mpirun with %s processes but without --world mpi: each "
                         "process runs its own world of ranks\n", n);
  return std::nullopt;
}

// The commands that run an implementation run it in a supervised child in
// the thread world (a plugin that ends the process cannot end it with a
// pass); under mpirun, mpirun is the supervisor: a rank that ends before
// MPI_Finalize fails the job.
void supervise_command(CLI::App& app, Commands& c) {
  // The reports asked for are written by the supervisor when the command
  // ends with no verdict: a CI job reads one error there, never nothing.
  const std::vector<std::pair<std::string, ReportFlags*>> reports{
      {"verify", &c.verify.report}, {"sweep", &c.sweep.report},   {"faults", &c.faults.report},
      {"soak", &c.soak.report},     {"replay", &c.replay.report}, {"gate", &c.gate.report}};
  for (const auto& [name, flags] : reports) {
    if (!app.got_subcommand(name)) continue;
    std::vector<std::string> specs = flags->specs;
    if (!flags->junit.empty()) specs.push_back("junit=" + flags->junit);
    if (name == "gate" && !c.gate.markdown.empty()) specs.push_back("markdown=" + c.gate.markdown);
    collcheck::supervise(fmt::format("collcheck {}", name), [specs, name = name](const std::string& why) {
      collcheck::write_no_verdict_reports(name, specs, why);
    });
  }
}

int dispatch(CLI::App& app, Commands& c, const collcheck::Session& session) {
  try {
    for (ReportFlags* r : {&c.sweep.report, &c.verify.report, &c.replay.report, &c.faults.report, &c.analyze.report,
                           &c.soak.report, &c.gate.report, &c.run.report})
    {
      parse_reports(*r);  // before the run: a report that cannot be written is bad input
      start_events(*r, session);
    }
    if (app.got_subcommand("sweep")) {
      c.sweep.job.ranks_given = app.get_subcommand("sweep")->count("--ranks") > 0;
      return run_sweep_command(c.sweep, session);
    }
    if (app.got_subcommand("verify")) return run_verify_command(c.verify, session);
    if (app.got_subcommand("replay")) return run_replay_command(c.replay, session);
    if (app.got_subcommand("analyze")) return run_analyze_command(c.analyze);
    if (app.got_subcommand("run")) return run_run_command(c.run);
    if (app.got_subcommand("faults")) return run_faults_command(c.faults, session);
    if (app.got_subcommand("soak")) return run_soak_command(c.soak, session);
    if (app.got_subcommand("gate")) return run_gate_command(c.gate, session);
    std::fprintf(stderr, "collcheck: error: no subcommand given; allowed: verify, replay, analyze, run, faults, sweep, soak, gate (see --help)\n");
    return 2;
  } catch (const UsageError& ex) {
    // In the MPI world every rank finds the same error; rank 0 says it.
    if (session.root())
      std::fprintf(stderr, "collcheck: error: %s\n", ex.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "collcheck: error: out of memory for the sizes asked for\n");
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collcheck: a verification and fault-injection harness for All-Reduce"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the collective libraries compiled in");
  Commands c;
  add_commands(app, c);
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

  // A bad COLLCHECK_SIM_STALL_S is a usage error here, before any world runs
  // (later it would end a supervised child, which the parent reports as no
  // verdict).
  (void)collcheck::sim_stall_limit_s();

  // verify's workers make and free large buffers on threads of their own:
  // 1.25 times the cases a second with huge pages there. A replay runs on the
  // main thread, whose heap has them already, and was 1.2 times slower with
  // glibc's (faults and soak: no difference).
  if (app.got_subcommand("verify")) collcheck::restart_with_huge_page_heaps(argv);

  if (version) {
    fmt::print("collcheck {}\n", COLLCHECK_VERSION);
    fmt::print("implementations:\n");
    for (const auto& k : collcheck::peer_kinds()) fmt::print("  {:<21} {}\n", k.spec, k.describe());
    return 0;
  }
  if (const auto refused = refuse_shared_paths(app)) return *refused;
  collcheck::Session session;  // threads, unless --world mpi starts MPI
  if (const auto failed = start_session(app, c, argc, argv, session)) return *failed;
  if (!session.is_mpi()) supervise_command(app, c);
  collcheck::install_exit_guard();
  collcheck::install_crash_handler();
  if (auto* w = session.mpi()) {
    collcheck::set_crash_identity(fmt::format("rank {} of {} (pid {} on {})", w->rank(), w->size(), ::getpid(), w->host()));
    collcheck::set_crash_process_rank(w->rank());
  } else {
    collcheck::set_crash_identity(fmt::format("collcheck (pid {})", ::getpid()));
  }
  const int code = dispatch(app, c, session);
  collcheck::verdict_reached(code);
  session.finish();
  return code;
}