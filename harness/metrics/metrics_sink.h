// The metrics as a sink of the event stream (harness/report/events.h): the
// jobs emit what they measured and judged, and this sink counts it into the
// registry. No job feeds the metrics by hand.
//
//   unit events (a soak unit, or a whole verify run as one): collcheck_units_total
//     and _failures_total by impl, workload and property; a fault unit's nemesis
//     and outcome, time to diagnosis and arrival skew; a perf unit's row; the
//     timed calls of rank 0 the event carries;
//   row events (sweep rows): a unit of workload "sweep" each, its wrong
//     elements, the call's time and busbw.
#pragma once

#include <memory>

#include "harness/metrics/metrics.h"
#include "harness/report/events.h"

namespace collcheck {

// `m` must outlive the sink.
std::shared_ptr<EventSink> metrics_sink(Metrics& m);

}  // namespace collcheck
