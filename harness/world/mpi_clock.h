// One time origin for every process of an MPI world, so that a time in rank
// 3's flight recorder and one in rank 0's can be compared: the slow-link
// analysis subtracts a send's post on one rank from a receive's completion on
// another.
//
// Each process used to take its own origin as it left a barrier. Under load
// processes leave a barrier milliseconds apart (measured: 3-15 ms with 8
// busy processes on 2 cores), and that offset was in every transfer between
// two ranks: one healthy ring edge looked 15 ms slow in every call, and was
// named in place of the slow one.
//
// Now rank 0 takes the origin and sends it to every process as a reading of
// its clock. Processes that read one CLOCK_MONOTONIC (one kernel, one time
// namespace: the same boot id and /proc/self/ns/time) use it as it is,
// exactly. Elsewhere (another node) the lowest rank of each clock measures
// its offset from rank 0's by ping-pong, keeping the round trip that took
// least (Cristian's method: the error is at most half that round trip), and
// shares it with the ranks of its clock.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>

#include "impl/sched.h"

namespace collcheck {

// One ping-pong with rank 0, in nanoseconds: this process's clock when it
// sent, rank 0's clock when it answered, this process's clock when the answer
// came.
struct ClockSample {
  int64_t sent_ns = 0, peer_ns = 0, back_ns = 0;
};

// Rank 0's clock minus this process's, and how far off it may be.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;  // half the shortest round trip; 0 for a shared clock
};

// The offset from the sample with the shortest round trip (Cristian). At
// least one sample.
ClockOffset offset_from_samples(std::span<const ClockSample> samples);

// What names this process's CLOCK_MONOTONIC: the kernel's boot id and the
// time namespace. Equal on two processes: they read the same clock.
std::string clock_identity();

// Collective over `control` (every process, after a barrier): the world's
// time origin in this process's clock, and how it was aligned. `estimate`
// measures every process's offset by ping-pong, even on one host (what the
// tests use to check the estimate; COLLCHECK_MPI_CLOCK=estimate). Throws
// std::runtime_error if a process does not answer by `by`.
struct CommonEpoch {
  Clock::time_point epoch;
  ClockOffset offset;
  bool shared = true;  // this process reads rank 0's clock
};
CommonEpoch common_epoch(MPI_Comm control, int rank, int size, Deadline by, bool estimate);

}  // namespace collcheck
