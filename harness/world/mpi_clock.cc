#include "harness/world/mpi_clock.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "harness/world/mpi_world.h"

namespace collcheck {

namespace {

constexpr int kRounds = 16;             // ping-pongs per clock; the shortest round trip counts
constexpr size_t kIdentityBytes = 96;  // a boot id (36) and a namespace inode, padded

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// What did not happen is formatted only when it did not.
template <class... Args>
void wait_or_throw(MPI_Request& req, Deadline by, fmt::format_string<Args...> what, Args&&... args) {
  if (!complete_by(req, by))
    throw std::runtime_error(fmt::format("aligning the processes' clocks: {} by the deadline",
                                         fmt::format(what, std::forward<Args>(args)...)));
}

// Rank 0's side of one clock's ping-pongs with `peer`.
void answer_pings(MPI_Comm control, int peer, Deadline by) {
  for (int k = 0; k < kRounds; ++k) {
    int64_t ping = 0;
    MPI_Request req;
    MPI_Irecv(&ping, 1, MPI_INT64_T, peer, control_tag::kClockSync, control, &req);
    wait_or_throw(req, by, "rank {}'s ping did not come", peer);
    int64_t at = now_ns();
    MPI_Isend(&at, 1, MPI_INT64_T, peer, control_tag::kClockSync, control, &req);
    wait_or_throw(req, by, "an answer was not taken");
  }
}

// A leader's side: its offset from rank 0's clock.
ClockOffset ping_rank0(MPI_Comm control, Deadline by) {
  std::array<ClockSample, kRounds> samples;
  for (auto& s : samples) {
    int64_t ping = 0;
    MPI_Request reqs[2];
    MPI_Irecv(&s.peer_ns, 1, MPI_INT64_T, 0, control_tag::kClockSync, control, &reqs[0]);
    s.sent_ns = now_ns();
    MPI_Isend(&ping, 1, MPI_INT64_T, 0, control_tag::kClockSync, control, &reqs[1]);
    wait_or_throw(reqs[0], by, "rank 0 did not answer a ping");
    s.back_ns = now_ns();
    wait_or_throw(reqs[1], by, "rank 0 did not take a ping");
  }
  return offset_from_samples(samples);
}

}  // namespace

ClockOffset offset_from_samples(std::span<const ClockSample> samples) {
  if (samples.empty()) throw std::logic_error("offset_from_samples: no sample");
  const ClockSample* best = &samples.front();
  for (const auto& s : samples)
    if (s.back_ns - s.sent_ns < best->back_ns - best->sent_ns) best = &s;
  const int64_t rtt = best->back_ns - best->sent_ns;
  // Rank 0 read its clock somewhere in the round trip: at its middle, the
  // error is at most half of it.
  return ClockOffset{best->peer_ns - (best->sent_ns + rtt / 2), (rtt + 1) / 2};
}

namespace {

std::string read_clock_identity() {
  std::string id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, id);
  if (id.empty()) id = "no-boot-id";
  struct stat st {};
  if (::stat("/proc/self/ns/time", &st) == 0) id += fmt::format(" time-ns {}", static_cast<unsigned long long>(st.st_ino));
  return id;
}

}  // namespace

std::string clock_identity() {
  static const std::string id = read_clock_identity();  // read once: an MPI process keeps its boot and time namespace
  return id;
}

CommonEpoch common_epoch(MPI_Comm control, int rank, int size, Deadline by, bool estimate) {
  // Every process's clock identity; with `estimate`, each its own.
  std::string mine = clock_identity();
  if (estimate) mine += fmt::format(" rank {}", rank);
  mine.resize(kIdentityBytes, '\0');
  std::vector<char> all(kIdentityBytes * static_cast<size_t>(size));
  MPI_Request req;
  MPI_Iallgather(mine.data(), kIdentityBytes, MPI_CHAR, all.data(), kIdentityBytes, MPI_CHAR, control, &req);
  wait_or_throw(req, by, "not every process gave its clock");
  auto identity = [&](int r) { return std::string_view(all.data() + kIdentityBytes * static_cast<size_t>(r), kIdentityBytes); };
  // The lowest rank reading each clock measures it against rank 0's.
  auto leader = [&](int r) {
    for (int q = 0;; ++q)
      if (identity(q) == identity(r)) return q;
  };
  const int64_t origin0 = rank == 0 ? now_ns() : 0;
  ClockOffset measured;
  if (rank == 0) {
    for (int r = 1; r < size; ++r)
      if (leader(r) == r && identity(r) != identity(0)) answer_pings(control, r, by);
  } else if (leader(rank) == rank && identity(rank) != identity(0)) {
    measured = ping_rank0(control, by);
  }
  // Each leader's offset to every process, then rank 0's origin.
  std::array<int64_t, 2> out{measured.offset_ns, measured.uncertainty_ns};
  std::vector<int64_t> offsets(2 * static_cast<size_t>(size));
  MPI_Iallgather(out.data(), 2, MPI_INT64_T, offsets.data(), 2, MPI_INT64_T, control, &req);
  wait_or_throw(req, by, "not every process gave its clock's offset");
  int64_t origin = origin0;
  MPI_Ibcast(&origin, 1, MPI_INT64_T, 0, control, &req);
  wait_or_throw(req, by, "rank 0's time origin did not come");
  CommonEpoch e;
  const size_t l = static_cast<size_t>(leader(rank));
  e.shared = identity(rank) == identity(0);
  if (!e.shared) e.offset = ClockOffset{offsets[2 * l], offsets[2 * l + 1]};
  // Rank 0's reading, in this process's clock.
  e.epoch = Clock::time_point(std::chrono::nanoseconds(origin - e.offset.offset_ns));
  return e;
}

}  // namespace collcheck
