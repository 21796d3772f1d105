// Where a run's metrics go, as the user asked (--metrics-listen,
// --pushgateway, --push-job, --metrics-textfile, --metrics-linger): checked
// before the run, opened at its start on the root (the registry, the
// endpoint, the gateway, and the sink that fills the registry from the job's
// events), and written at its end.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "harness/metrics/metrics.h"
#include "harness/report/events.h"

namespace collcheck {

struct MetricsOutputs {
  std::string listen;       // ADDR:PORT or PORT (127.0.0.1 unless ADDR is given); "": none
  std::string pushgateway;  // [http://]HOST:PORT; "": none
  std::string push_job;     // the Pushgateway's job name
  std::string textfile;     // node_exporter's textfile collector; "": none
  double linger = 0;        // with listen: seconds served after the end
};

// Checks every output (UsageError names the flag), on every process alike.
void check_metrics_outputs(const MetricsOutputs& f);

// Checks them and, on the root when any is given, makes the registry (its
// build info from `versions`), binds the endpoint (its address said to `ev`),
// sets the gateway and adds the metrics sink to `ev`; nullptr otherwise.
std::unique_ptr<Metrics> start_metrics(const MetricsOutputs& f, bool root,
                                       const std::map<std::string, std::string>& versions, Events& ev);

// The end of the run: the textfile and the push, then the linger. A push
// that fails is a warning (the gateway is another machine's); a textfile
// that cannot be written is an error: false (the command's exit code then
// becomes 5, kExitOutputLost, when it was 0).
bool finish_metrics(const MetricsOutputs& f, Metrics* m, Events& ev);

}  // namespace collcheck
