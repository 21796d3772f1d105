// The collcheck commands, one file each (<name>_command.cc): the flags a
// command takes (add_*) and what it runs (run_*_command). main.cc parses,
// starts the world the command asked for, and calls it. What every command
// shares is here: the --report flag, the exit codes, the seed's parsing.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "harness/metrics/metrics_outputs.h"
#include "harness/report/events.h"
#include "harness/report/progress.h"
#include "properties/faults_job.h"
#include "harness/report/report.h"
#include "harness/run/replay_job.h"
#include "harness/run/run_job.h"
#include "harness/run/sweep_job.h"
#include "harness/session/session.h"
#include "properties/gate_job.h"
#include "harness/soak/soak_job.h"
#include "properties/verify_job.h"

namespace collcheck::cli {

// --report FORMAT=PATH, on every command, repeatable; and the command's one
// stream of events (harness/report/events.h), which the lower rooms fill and
// the console, progress and streaming report sinks render.
struct ReportFlags {
  std::vector<std::string> specs;
  std::string junit;  // --junit PATH (verify, soak, gate): the same as --report junit=PATH
  std::vector<ReportRequest> requests;  // parsed from specs (parse_reports)
  std::shared_ptr<Events> events = std::make_shared<Events>();
};
void add_report_flag(CLI::App* command, ReportFlags& f);
void add_junit_flag(CLI::App* command, ReportFlags& f, const std::string& help);
// Before the run: every request is a known format and a writable file.
void parse_reports(ReportFlags& f);
// Before the run (main, for every command): the stream's sinks: the console,
// and (on the root) each streaming --report format.
void start_events(ReportFlags& f, const Session& session);
// A command's progress (--progress, on the root): a sink of `what` counting
// `unit`, put before the console so that the bar makes way for text; lines
// one every `line_every`.
void add_progress_sink(ReportFlags& f, const Session& session, const std::string& flag, const std::string& what,
                       const std::string& unit, std::chrono::milliseconds line_every = std::chrono::seconds(30));
// After the run, on the root: writes the requested reports and closes the
// stream. A report that cannot be written is an error (exit 5,
// kExitOutputLost) unless the verdict already failed.
int finish_reports(const ReportFlags& f, const Report& r, int code);

// --progress (harness/report/progress.h): the flag, and its style for this
// process (Off on every MPI rank but 0, which speaks for the world). Bad
// values are a UsageError naming the choices.
void add_progress_flag(CLI::App* command, std::string& f);
ProgressStyle progress_for(const std::string& f, const Session& session);

// The metrics flags (metrics_outputs.h) of the long-running commands (soak;
// sweep and verify at their end). `periodic`: the command exports during the run too (soak), so --metrics-listen
// and --metrics-linger are offered.
void add_metrics_flags(CLI::App* command, MetricsOutputs& f, const std::string& default_job, bool periodic);
// start_metrics (metrics_outputs.h) on the session's root, with the build's versions.
std::unique_ptr<Metrics> start_metrics(const MetricsOutputs& f, const Session& session, Events& ev);

// --world sim: the schedule, its seed, the α-β link model (docs/simulation.md).
struct SimFlags {
  std::string schedule = "random";
  std::string schedule_seed = "1";
  std::string link_model;
};
void add_sim_flags(CLI::App* command, SimFlags& f);

// The sweep's flags bind to a SweepJob (harness/run/sweep_job.h), which plans
// and runs it; the command adds the outputs: --json, the metrics, the reports.
struct SweepFlags {
  SweepJob job;
  std::string world = "threads";
  SimFlags sim;  // --world sim's schedule and link model
  std::string json;  // --json FILE
  MetricsOutputs metrics;
  ReportFlags report;
};
void add_sweep(CLI::App& app, SweepFlags& f);
int run_sweep_command(SweepFlags& f, const Session& session);

// verify's flags bind to a VerifyJob (properties/verify_job.h), which plans
// and runs it; the command adds the world, the progress and the outputs.
struct VerifyFlags {
  VerifyJob job;
  std::string world;  // "": sim for the reference algorithms, threads otherwise (--world)
  SimFlags sim;  // --world sim's schedule and link model
  std::string progress = "auto";
  MetricsOutputs metrics;
  ReportFlags report;
};
void add_verify(CLI::App& app, VerifyFlags& f);
int run_verify_command(VerifyFlags& f, const Session& session);

// soak's flags bind to a SoakJob (harness/soak/soak_job.h), which plans it;
// the command adds the world, the metrics and the reports.
struct SoakFlags {
  SoakJob job;
  std::string world = "threads";
  SimFlags sim;  // --world sim's schedule and link model
  MetricsOutputs metrics;
  ReportFlags report;
};
void add_soak(CLI::App& app, SoakFlags& f);
int run_soak_command(SoakFlags& f, const Session& session);

// gate's flags bind to a GateJob (properties/gate_job.h); the command adds the
// progress and writes the reports and the Markdown summary.
struct GateFlags {
  GateJob job;
  std::string progress = "auto";  // verify's progress on stderr (harness/report/progress.h)
  std::string markdown;  // also appended to $GITHUB_STEP_SUMMARY when that is set and this is not
  ReportFlags report;    // --report FORMAT=PATH, as every command
};
void add_gate(CLI::App& app, GateFlags& f);
int run_gate_command(GateFlags& f, const Session& session);

// replay's flags bind to a ReplayJob (harness/run/replay_job.h); the command
// adds the world, the progress and the reports.
struct ReplayFlags {
  ReplayJob job;
  std::string world;  // "": sim for the reference algorithms, threads otherwise (--world)
  SimFlags sim;  // --world sim's schedule and link model
  std::string progress = "auto";
  ReportFlags report;
};
void add_replay(CLI::App& app, ReplayFlags& f);
int run_replay_command(ReplayFlags& f, const Session& session);

struct AnalyzeFlags {
  std::string dir;
  int world_size = 0;  // PyTorch dumps: the job's size when the dumps do not hold it (0: from the dumps)
  std::string emit_scenario;  // PyTorch dumps: write a scenario that reproduces them here
  std::string emit_max_count = "65536";
  ReportFlags report;
};
void add_analyze(CLI::App& app, AnalyzeFlags& f);
int run_analyze_command(AnalyzeFlags& f);

// run's flags bind to a RunJob (harness/run/run_job.h).
struct RunFlags {
  collcheck::RunJob job;
  std::string emit_scenario;
  std::string emit_max_count = "65536";
  ReportFlags report;
};
void add_run(CLI::App& app, RunFlags& f);
int run_run_command(RunFlags& f);

// faults' flags bind to a FaultsJob (properties/faults_job.h); the command
// adds the world, the progress and the reports.
struct FaultsFlags {
  FaultsJob job;
  std::string world;  // "": sim for the reference algorithms, threads otherwise (--world)
  SimFlags sim;  // --world sim's schedule and link model
  std::string progress = "auto";  // --random's progress on stderr
  ReportFlags report;
};
void add_faults(CLI::App& app, FaultsFlags& f);
int run_faults_command(FaultsFlags& f, const Session& session);

}  // namespace collcheck::cli
