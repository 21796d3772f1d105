// The collcheck command line: parses, starts the world the command asked
// for, and runs the command (one file each: harness/cli/<name>_command.cc).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "harness/cli/commands.h"
#include "harness/cli/supervisor.h"
#include "harness/peers/peer_registry.h"
#include "harness/world/crash_handler.h"
#include "harness/world/mpi_world.h"

using namespace collcheck::cli;
using collcheck::UsageError;

int main(int argc, char** argv) {
  // Gloo's worlds hold p(p-1) sockets each: use the open-file limit the
  // system allows (the soft limit is often 1024 of a much larger hard one).
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  CLI::App app{"collcheck: a verification and fault-injection harness for All-Reduce"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "print the version and the collective libraries compiled in");

  SweepFlags sweep;
  add_sweep(app, sweep);
  VerifyFlags verify;
  add_verify(app, verify);
  ReplayFlags replay;
  add_replay(app, replay);
  FaultsFlags faults;
  add_faults(app, faults);
  AnalyzeFlags analyze;
  add_analyze(app, analyze);
  SoakFlags soak;
  add_soak(app, soak);
  GateFlags gate;
  add_gate(app, gate);

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
    fmt::print("implementations:\n");
    for (const auto& k : collcheck::peer_kinds()) fmt::print("  {:<21} {}\n", k.spec, k.describe());
    return 0;
  }

  // Two outputs, or an output and an input, that name one file: refused
  // before anything runs (every MPI process finds the same).
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

  // The MPI world starts before anything else runs; every process parsed the
  // same command line, so they all reach here, or all failed above alike.
  const bool sweep_ranks_given = app.get_subcommand("sweep")->count("--ranks") > 0;
  const bool mpi_world = (app.got_subcommand("sweep") && sweep.world == "mpi") ||
                         (app.got_subcommand("verify") && verify.world == "mpi") ||
                         (app.got_subcommand("replay") && replay.world == "mpi") ||
                         (app.got_subcommand("faults") && faults.world == "mpi") ||
                         (app.got_subcommand("soak") && soak.world == "mpi");
  for (const std::string* w : {&sweep.world, &verify.world, &replay.world, &faults.world, &soak.world})
    if (*w != "threads" && *w != "mpi") {
      std::fprintf(stderr, "collcheck: error: --world must be threads or mpi, got '%s'\n", w->c_str());
      return 2;
    }
  if (app.got_subcommand("verify") && verify.mpi_algo != -1 &&
      (verify.mpi_algo < 0 || verify.mpi_algo >= static_cast<int>(std::size(kMpiAllreduceAlgos)))) {
    fmt::print(stderr, "collcheck: error: --mpi-algo must be 0..{} ({}), got {}\n", std::size(kMpiAllreduceAlgos) - 1,
               mpi_algo_choices(), verify.mpi_algo);
    return 2;
  }
  collcheck::Session session;  // threads, unless --world mpi starts MPI below
  if (mpi_world) {
    if (verify.mpi_algo >= 0) {
      // Both, or coll/tuned silently ignores the choice.
      ::setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
      ::setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", std::to_string(verify.mpi_algo).c_str(), 1);
    }
    // The world is made once, here; the commands are handed it. A CI job that
    // forgot its launcher must not go green on a world of one.
    std::string warning;
    try {
      session = collcheck::Session::start_mpi(&argc, &argv, warning);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "collcheck: error: --world mpi: %s\n", ex.what());
      return 2;
    }
    if (!warning.empty()) std::fprintf(stderr, "collcheck: warning: %s\n", warning.c_str());
  } else if (const char* n = std::getenv("OMPI_COMM_WORLD_SIZE"); n && std::atoi(n) > 1) {
    std::fprintf(stderr, "collcheck: warning: started by mpirun with %s processes but without --world mpi: each "
                         "process runs its own thread world\n", n);
  }
  // The commands that run an implementation run it in a supervised child in
  // the thread world (a plugin that ends the process cannot end it with a
  // pass); under mpirun, mpirun is the supervisor: a rank that ends before
  // MPI_Finalize fails the job.
  if (!mpi_world) {
    // The reports asked for are written by the supervisor when the command
    // ends with no verdict: a CI job reads one error there, never nothing.
    const std::vector<std::pair<std::string, ReportFlags*>> reports{
        {"verify", &verify.report}, {"sweep", &sweep.report},   {"faults", &faults.report},
        {"soak", &soak.report},     {"replay", &replay.report}, {"gate", nullptr}};
    for (const auto& [name, flags] : reports) {
      if (!app.got_subcommand(name)) continue;
      std::vector<collcheck::ReportRequest> requests;
      if (flags)
        for (const std::string& spec : flags->specs) {
          try {
            requests.push_back(collcheck::parse_report_request(spec));
          } catch (const std::exception&) {  // the child says why, as bad input
          }
        }
      const std::string* junit = name == "verify" ? &verify.junit
                                 : name == "soak"   ? &soak.junit
                                 : name == "gate"   ? &gate.junit
                                                    : nullptr;
      if (junit && !junit->empty()) requests.push_back({"junit", *junit});
      if (name == "gate" && !gate.markdown.empty()) requests.push_back({"markdown", gate.markdown});
      supervise(fmt::format("collcheck {}", name), [requests, name = name](const std::string& why) {
        collcheck::Report rep;
        rep.command = name;
        rep.suite = "collcheck " + name;
        rep.cases.push_back({"verdict", collcheck::ReportCase::Status::Error, "no verdict: " + why, "", 0});
        try {
          collcheck::write_reports(requests, rep);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "collcheck: error: --report: %s\n", e.what());
        }
      });
    }
  }
  collcheck::install_exit_guard();
  collcheck::install_crash_handler();
  if (auto* w = session.mpi()) {
    collcheck::set_crash_identity(fmt::format("rank {} of {} (pid {} on {})", w->rank(), w->size(), ::getpid(), w->host()));
    collcheck::set_crash_process_rank(w->rank());
  } else {
    collcheck::set_crash_identity(fmt::format("collcheck (pid {})", ::getpid()));
  }
  const int code = [&]() -> int {

  try {
    for (ReportFlags* r :
         {&sweep.report, &verify.report, &replay.report, &faults.report, &analyze.report, &soak.report, &gate.report})
      parse_reports(*r);  // before the run: a report that cannot be written is bad input
    if (app.got_subcommand("sweep")) return run_sweep_command(sweep, sweep_ranks_given, session);
    if (app.got_subcommand("verify")) return run_verify_command(verify, session);
    if (app.got_subcommand("replay")) return run_replay_command(replay, session);
    if (app.got_subcommand("analyze")) return run_analyze_command(analyze);
    if (app.got_subcommand("faults")) return run_faults_command(faults, session);
    if (app.got_subcommand("soak")) return run_soak_command(soak, session);
    if (app.got_subcommand("gate")) return run_gate_command(gate, session);
    std::fprintf(stderr, "collcheck: error: no subcommand given; allowed: verify, replay, analyze, faults, sweep, soak, gate (see --help)\n");
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
  }();
  verdict_reached(code);
  session.finish();
  return code;
}
