// Where a run's metrics go (metrics_outputs.h).
#include "harness/metrics/metrics_outputs.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "harness/metrics/metrics_sink.h"
#include "harness/metrics/pusher.h"
#include "harness/model/usage_error.h"

namespace collcheck {

void check_metrics_outputs(const MetricsOutputs& f) {
  if (!(f.linger >= 0) || f.linger > 3600)
    throw UsageError(fmt::format("--metrics-linger must be in [0, 3600] seconds, got {}", f.linger));
  if (!f.pushgateway.empty() && (f.push_job.empty() || f.push_job.find('/') != std::string::npos))
    throw UsageError(fmt::format("--push-job must be a name without '/', got '{}'", f.push_job));
  if (!f.textfile.empty()) {
    try {
      check_report_path(f.textfile, "--metrics-textfile");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (!f.pushgateway.empty()) {
    try {
      (void)push_target(f.pushgateway, "job", "");
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  std::string addr = f.listen;
  if (!addr.empty() && addr.find(':') == std::string::npos) addr = "127.0.0.1:" + addr;
  if (!addr.empty()) {
    try {
      check_listen_address(addr);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
}

std::unique_ptr<Metrics> start_metrics(const MetricsOutputs& f, bool root,
                                       const std::map<std::string, std::string>& versions, Events& ev) {
  check_metrics_outputs(f);
  std::string addr = f.listen;
  if (!addr.empty() && addr.find(':') == std::string::npos) addr = "127.0.0.1:" + addr;
  if (!root || (f.listen.empty() && f.pushgateway.empty() && f.textfile.empty())) return nullptr;
  // In the MPI world rank 0 judges every unit: its registry holds the world's.
  auto m = std::make_unique<Metrics>(versions);
  if (!f.pushgateway.empty()) m->set_pushgateway(f.pushgateway, f.push_job, "");
  if (!addr.empty()) {
    try {
      const int port = m->listen(addr);
      ev.print("metrics: http://{}:{}/metrics\n", addr.substr(0, addr.rfind(':')), port);
    } catch (const std::exception& e) {
      throw UsageError(fmt::format("--metrics-listen: {}", e.what()));
    }
  }
  ev.add(metrics_sink(*m));
  return m;
}

bool finish_metrics(const MetricsOutputs& f, Metrics* m, Events& ev) {
  if (!m) return true;
  bool ok = true;
  if (!f.textfile.empty()) {
    try {
      m->write_textfile(f.textfile);
    } catch (const std::exception& e) {
      ev.warn("collcheck: error: --metrics-textfile: {}\n", e.what());
      ok = false;
    }
  }
  if (!f.pushgateway.empty()) {
    m->push();
    if (const std::string why = m->finish_pushes(); !why.empty())
      ev.warn("collcheck: warning: --pushgateway {}: {}\n", f.pushgateway, why);
  }
  if (!f.listen.empty() && f.linger > 0) {
    ev.print("metrics: serving the final values for {} s more\n", f.linger);
    std::this_thread::sleep_for(std::chrono::duration<double>(f.linger));
  }
  return ok;
}

}  // namespace collcheck
