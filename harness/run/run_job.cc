#include "harness/run/run_job.h"

#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "harness/model/child_process.h"
#include "harness/model/exit_codes.h"
#include "harness/model/usage_error.h"
#include "harness/run/analyze_job.h"

#ifndef COLLCHECK_INSTALL_LIBDIR
#define COLLCHECK_INSTALL_LIBDIR "lib"
#endif

namespace collcheck {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLibrary = "libcollcheck-mpi.so";

std::string find_library(const std::string& asked, const std::string& self_exe) {
  if (!asked.empty()) {
    if (!fs::is_regular_file(asked)) throw UsageError(fmt::format("--mpi-lib: {} is not a file", asked));
    return fs::absolute(asked).string();
  }
  if (const char* env = std::getenv("COLLCHECK_MPI_LIB"); env && *env) {
    if (!fs::is_regular_file(env)) throw UsageError(fmt::format("COLLCHECK_MPI_LIB: {} is not a file", env));
    return fs::absolute(env).string();
  }
  const fs::path here = fs::path(self_exe).parent_path();
  for (const fs::path& p : {here / kLibrary, here / ".." / COLLCHECK_INSTALL_LIBDIR / kLibrary, here / ".." / "lib" / kLibrary})
    if (fs::is_regular_file(p)) return fs::canonical(p).string();
  throw UsageError(fmt::format("--mpi-lib: {} is not next to {} nor in ../{}: name it with --mpi-lib PATH or "
                               "COLLCHECK_MPI_LIB", kLibrary, self_exe, COLLCHECK_INSTALL_LIBDIR));
}

int dumps_in(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("mpi_trace_rank_") && name.ends_with(".json")) ++n;
  }
  return n;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs the launcher until it ends; stops it when a rank's watchdog fired (or
// a rank ended the job: DIR/ended) and the launcher did not end the job by
// itself within 10 s, or at the time
// limit (after asking every rank for its dump). Returns its exit code, or
// -signal; sets `stopped` when collcheck ended it.
int run_launcher(const RunJob& job, const std::vector<std::pair<std::string, std::string>>& env, Events& ev,
                 bool& stopped) {
  const ChildProcess child = start_child(job.command, env, false);
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> fired;
  const std::string marker = job.dir + "/hang", ended = job.dir + "/ended";
  for (;;) {
    if (auto code = poll_child(child)) return *code;
    std::error_code ec;
    if (!fired && (fs::exists(marker, ec) || fs::exists(ended, ec))) fired = std::chrono::steady_clock::now();
    if (fired && since(*fired) > 10) {
      ev.print("collcheck run: a rank ended the job (a deadline passed, the guard, MPI_Abort or an MPI error) and the "
               "launcher has not ended it 10 s later; stopping it\n");
      stopped = true;
      return stop_child(child, 5);
    }
    if (!fired && since(t0) > job.time_limit_s) {
      ev.print("collcheck run: the job ran past --time-limit {} s; every rank is asked for its dump, then it is "
               "stopped\n", job.time_limit_s);
      std::ofstream(marker) << "collcheck run: time limit\n";
      fired = std::chrono::steady_clock::now();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

void check_run_job(RunJob& job, const std::string& self_exe) {
  if (job.command.empty())
    throw UsageError("collcheck run: no command; write it after --, such as: collcheck run -- mpirun -np 4 ./app");
  if (job.mode != "guarded" && job.mode != "unguarded")
    throw UsageError(fmt::format("--mode: '{}'; allowed: guarded, unguarded", job.mode));
  if (!(job.deadline_s > 0 && job.deadline_s <= 86400))
    throw UsageError(fmt::format("--deadline: {} s; allowed: above 0 and up to 86400", job.deadline_s));
  if (!(job.time_limit_s > 0 && job.time_limit_s <= 7 * 86400))
    throw UsageError(fmt::format("--time-limit: {} s; allowed: above 0 and up to 604800", job.time_limit_s));
  job.library = find_library(job.library, self_exe);
  if (job.dir.empty())
    job.dir = fmt::format("collcheck-run-{}-{}", static_cast<long long>(std::time(nullptr)), ::getpid());
  std::error_code ec;
  if (fs::exists(job.dir, ec) && !fs::is_directory(job.dir, ec))
    throw UsageError(fmt::format("--dir: {} exists and is not a directory", job.dir));
  if (fs::is_directory(job.dir, ec) &&
      (dumps_in(job.dir) > 0 || fs::exists(job.dir + "/hang", ec) || fs::exists(job.dir + "/ended", ec)))
    throw UsageError(fmt::format("--dir: {} already holds a run's dumps; name a new or empty directory (the dumps of "
                                 "two runs would be read as one)", job.dir));
  fs::create_directories(job.dir, ec);
  if (ec) throw UsageError(fmt::format("--dir: cannot make {}: {}", job.dir, ec.message()));
  job.dir = fs::canonical(job.dir).string();
}

int run_mpi_job(const RunJob& job, Events& ev, Report& rep) {
  std::string preload = job.library;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  const std::string run_id = fs::path(job.dir).filename().string();
  const std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", preload},
      {"COLLCHECK_MPI_DIR", job.dir},
      {"COLLCHECK_MPI_MODE", job.mode},
      {"COLLCHECK_MPI_DEADLINE", fmt::format("{}", job.deadline_s)},
      {"COLLCHECK_MPI_RUN_ID", run_id},
  };
  ev.print("collcheck run: {} ({} mode, deadline {} s per blocking call); dumps in {}\n", command_text(job.command),
           job.mode, job.deadline_s, job.dir);
  bool stopped = false;
  int launcher = 0;
  try {
    launcher = run_launcher(job, env, ev, stopped);
  } catch (const std::runtime_error& e) {
    std::error_code ec;
    fs::remove(job.dir, ec);  // made for this run and still empty (remove leaves a non-empty one)
    throw UsageError(fmt::format("collcheck run: {}", e.what()));
  }
  ev.print("collcheck run: the job ended ({}){}\n",
           launcher >= 0 ? fmt::format("exit code {}", launcher) : fmt::format("signal {}", -launcher),
           stopped ? ", stopped by collcheck" : "");
  if (dumps_in(job.dir) == 0) {
    const std::string why = fmt::format(
        "no dumps in {}: the program never called MPI_Init, or the launcher did not pass LD_PRELOAD and the "
        "COLLCHECK_MPI_* variables to the ranks (mpirun passes them on one node; across nodes add -x LD_PRELOAD "
        "-x COLLCHECK_MPI_DIR -x COLLCHECK_MPI_MODE -x COLLCHECK_MPI_DEADLINE, and the directory must be shared)",
        job.dir);
    ev.print("collcheck run: cannot decide: {}\n", why);
    rep.command = "run";
    rep.suite = "collcheck run " + command_text(job.command);
    rep.cases.push_back(ReportCase{"the job left dumps", ReportCase::Status::Error, why, "", 0});
    return kExitUndecided;
  }
  resolve_call_sites(job.dir);
  AnalyzeJob a{job.dir, 0, job.emit_scenario, job.emit_max_count};
  const int code = run_analyze_job(a, ev, rep);
  rep.command = "run";
  rep.suite = "collcheck run " + command_text(job.command);
  if (code == 0 && launcher != 0) {
    const std::string why = fmt::format("the job failed ({}), and its dumps show no collective bug: not a pass",
                                        launcher >= 0 ? fmt::format("exit code {}", launcher)
                                                      : fmt::format("signal {}", -launcher));
    ev.print("collcheck run: {}\n", why);
    rep.cases.push_back(ReportCase{"the job ended well", ReportCase::Status::Error, why, "", 0});
    return kExitHarnessError;
  }
  ev.print("collcheck run: the dumps stay in {}; `collcheck analyze {}` reads them again\n", job.dir, job.dir);
  return code;
}

}  // namespace collcheck
