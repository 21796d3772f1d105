// What sweep.cc shares with sweep_measure.cc and sweep_output.cc. Not for use
// outside the sweep.
#pragma once

#include <cstddef>
#include <cstdio>
#include <vector>

#include "harness/run/sweep.h"

namespace collcheck {

// memcpy between two buffers of `bytes`, `iters` times: GB/s copied.
double memcpy_bandwidth(size_t bytes, int iters);
// memcpy on `threads` threads at once, each between buffers of its own of
// `bytes`: the bytes copied per second, summed over the threads. With as
// many threads as the ranks have cores, it is what the machine's memory gives
// the ranks together (one thread alone may not reach it).
double memcpy_bandwidth_threads(size_t bytes, int iters, int threads);

// The memory-traffic bound of the ring beside the rows of the largest size
// (ranks as threads only); `aw`: the algorithm column's width.
void print_traffic_bound(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows, int p, size_t largest,
                         size_t aw);
// Measured against modelled, row by row, and ring against hierarchical.
void print_model(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows, int p, int nodes);
// The implementation against --against, row by row.
void print_against(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows);

}  // namespace collcheck
