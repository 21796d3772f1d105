// What every command shares: the --report flag and the seed's parsing.
#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>

#include "harness/cli/commands.h"
#include "harness/peers/gloo_impl.h"
#include "harness/peers/mpi_impl.h"
#include "harness/peers/nccl_impl.h"

namespace collcheck::cli {

void add_report_flag(CLI::App* command, ReportFlags& f) {
  command->add_option("--report", f.specs,
                      "also write the verdicts as FORMAT=PATH (repeatable), atomically; formats: " + report_format_help());
}

void add_junit_flag(CLI::App* command, ReportFlags& f, const std::string& help) {
  command->add_option("--junit", f.junit, help + " (the same as --report junit=PATH)");
}

void parse_reports(ReportFlags& f) {
  try {
    for (const auto& spec : f.specs) f.requests.push_back(parse_report_request(spec));
    if (!f.junit.empty()) {
      check_report_path(f.junit, "--junit");
      f.requests.push_back({"junit", f.junit});
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void add_sim_flags(CLI::App* command, SimFlags& f) {
  command->add_option("--schedule", f.schedule, "--world sim: random, or pct / pct:D (PCT with bug depth D, default 3)")
      ->capture_default_str();
  command->add_option("--schedule-seed", f.schedule_seed, "--world sim: the schedule's seed (mixed with each case's)")
      ->capture_default_str();
  command->add_option("--link-model", f.link_model,
                      "--world sim: the α-β model, as alpha_node=1us,beta_node=20GB/s,alpha_net=5us,beta_net=12.5GB/s,"
                      "reduce=10GB/s (any subset; these are the defaults)");
}

void add_progress_flag(CLI::App* command, std::string& f) {
  command->add_option("--progress", f, "progress on stderr: auto (a bar on a terminal, a line every 30 s elsewhere), bar, lines, off")
      ->capture_default_str();
}

ProgressStyle progress_for(const std::string& f, const Session& session) {
  ProgressStyle st = ProgressStyle::Off;
  try {
    st = progress_style(f);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return session.root() ? st : ProgressStyle::Off;
}

void start_events(ReportFlags& f, const Session& session) {
  Events& ev = *f.events;
  ev.add(console_sink());
  if (!session.root()) return;
  try {
    for (auto& sink : open_report_streams(f.requests)) ev.add(std::move(sink));
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
}

void add_progress_sink(ReportFlags& f, const Session& session, const std::string& flag, const std::string& what,
                       const std::string& unit, std::chrono::milliseconds line_every) {
  if (const ProgressStyle st = progress_for(flag, session); st != ProgressStyle::Off)
    f.events->add(progress_sink(what, unit, st, stderr, line_every), /*first=*/true);
}

int finish_reports(const ReportFlags& f, const Report& r, int code) {
  std::string failed;
  // Every command's stream ends with its verdicts, as the other formats list them.
  for (const ReportCase& c : r.cases) f.events->emit(VerdictEvent{c});
  try {
    f.events->close();
  } catch (const std::runtime_error& e) {
    failed = e.what();
  }
  try {
    if (!f.requests.empty()) write_reports(f.requests, r);
  } catch (const std::runtime_error& e) {
    failed += (failed.empty() ? "" : "; ") + std::string(e.what());
  }
  if (failed.empty()) return code;
  // The verdict above stands; a report that could not be written is still an error.
  // (A sink of another flag, --json FILE, names its flag itself.)
  std::fprintf(stderr, "collcheck: error: %s%s\n", failed.rfind("--", 0) == 0 ? "" : "--report: ", failed.c_str());
  return code == 0 ? kExitOutputLost : code;
}

void add_metrics_flags(CLI::App* c, MetricsOutputs& f, const std::string& default_job, bool periodic) {
  f.push_job = default_job;
  if (periodic) {
    c->add_option("--metrics-listen", f.listen,
                  "serve /metrics on ADDR:PORT or PORT (127.0.0.1 unless ADDR is given; port 0 picks a free one and "
                  "prints it)");
    c->add_option("--metrics-linger", f.linger,
                  "with --metrics-listen: keep serving /metrics this many seconds after the end, for a last scrape")
        ->capture_default_str();
  }
  c->add_option("--pushgateway", f.pushgateway,
                std::string("push the metrics to a Pushgateway at HOST:PORT") +
                    (periodic ? ", every --metrics-interval and at the end" : " at the end") +
                    " (the job's group is replaced each time)");
  c->add_option("--push-job", f.push_job, "the Pushgateway job name")->capture_default_str();
  c->add_option("--metrics-textfile", f.textfile,
                std::string("write the metrics atomically to PATH (node_exporter's textfile collector)") +
                    (periodic ? ", every --metrics-interval and at the end" : " at the end"));
}

std::unique_ptr<Metrics> start_metrics(const MetricsOutputs& f, const Session& session, Events& ev) {
  // In the MPI world rank 0 judges every unit: its registry holds the world's.
  return collcheck::start_metrics(f, session.root(),
                                  {{"version", COLLCHECK_VERSION}, {"mpi", mpi_library_version()},
                                   {"gloo", gloo_version()}, {"nccl", nccl_version_string()}},
                                  ev);
}

}  // namespace collcheck::cli
