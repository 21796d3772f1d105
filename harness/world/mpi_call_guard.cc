// Guarded mode's fingerprint exchange over MPI (World::call_guard).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <string>
#include <thread>
#include <vector>

#include "harness/check/guard.h"
#include "harness/world/mpi_world.h"

namespace collcheck {

namespace {

// Guarded mode over MPI: each rank posts every rank's fingerprint of a call
// into its own FingerprintGuard. A rank that never posts (stalled) is waited
// for until the call's deadline; the call then fails with GuardTimeout, which
// names it (and the communicator records this rank as blocked on it).
class MpiCallGuard final : public CallGuard {
 public:
  MpiCallGuard(int p, Clock::time_point epoch, std::chrono::milliseconds deadline)
      : p_(p), deadline_(deadline), guard_(p, epoch, std::chrono::milliseconds(0)) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    if (flag && ub) tag_ub_ = *static_cast<int*>(ub);
  }
  ~MpiCallGuard() override { MPI_Comm_free(&comm_); }
  MpiCallGuard(const MpiCallGuard&) = delete;
  MpiCallGuard& operator=(const MpiCallGuard&) = delete;

  void check(int rank, const CallFingerprint& fp) override {
    const Deadline until = Clock::now() + deadline_;
    const std::string mine = fingerprint_to_json(fp);
    const int tag = static_cast<int>(fp.seq % (static_cast<uint64_t>(tag_ub_) + 1));
    std::vector<MPI_Request> sends;
    for (int q = 0; q < p_; ++q) {
      if (q == rank) continue;
      sends.emplace_back();
      MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, q, tag, comm_, &sends.back());
    }
    std::vector<bool> got(static_cast<size_t>(p_), false);
    got[static_cast<size_t>(rank)] = true;
    int missing = p_ - 1;
    while (missing > 0 && Clock::now() < until) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st);
      if (!flag) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string text(static_cast<size_t>(n), '\0');
      MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE);
      if (!got[static_cast<size_t>(st.MPI_SOURCE)]) {
        got[static_cast<size_t>(st.MPI_SOURCE)] = true;
        --missing;
      }
      try {
        guard_.check(st.MPI_SOURCE, fingerprint_from_json(text));
      } catch (const GuardViolation&) {  // judged below, once this rank's own fingerprint is in
      }
    }
    for (auto& r : sends) {  // small messages go eagerly; a peer that never reads them cannot hold us
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&r);
    }
    guard_.check(rank, fp);  // throws GuardViolation naming the mismatch, the same on every rank
    if (missing == 0) return;
    // Some rank never posted its fingerprint: this rank waited in the call
    // for it (blocked on it, as a transfer of the call would have been) until
    // the deadline. Entering the algorithm with the deadline spent would only
    // fail on whichever peer it reads first and blame that one.
    std::vector<int> absent;
    for (int q = 0; q < p_; ++q)
      if (!got[static_cast<size_t>(q)]) absent.push_back(q);
    throw GuardTimeout(fmt::format("rank {}: {} of call #{} did not arrive by the deadline (guarded mode's "
                                   "fingerprint exchange): {} never entered it",
                                   rank, absent.size() == 1 ? "the fingerprint of rank " + std::to_string(absent[0])
                                                            : fmt::format("the fingerprints of ranks {}", fmt::join(absent, ", ")),
                                   fp.seq, absent.size() == 1 ? "it" : "they"),
                       absent);
  }
  std::optional<Diagnosis> violation() const override { return guard_.violation(); }
  double violation_time() const override { return guard_.violation_time(); }

 private:
  int p_;
  std::chrono::milliseconds deadline_;
  FingerprintGuard guard_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int tag_ub_ = 32767;
};

}  // namespace

std::unique_ptr<CallGuard> MpiWorld::call_guard(Clock::time_point epoch, std::chrono::milliseconds deadline) {
  return std::make_unique<MpiCallGuard>(size_, epoch, deadline);
}

}  // namespace collcheck
