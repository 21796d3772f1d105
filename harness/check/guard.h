// Guarded mode: before each collective, every rank's call fingerprint is
// checked against the other ranks'. In the thread world the table is shared
// memory: the rank that arrives second at a mismatching call sees it at once,
// without waiting for any timeout. (The MPI world does the same with a small
// extra exchange; see the peers issue.)
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/history/fingerprint.h"
#include "harness/check/diagnosis.h"

namespace collcheck {

class GuardViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A guard that waits for every rank's fingerprint (the MPI world's exchange)
// gave up at the call's deadline: `missing` never entered the call. The rank
// that throws it was waiting in the call for them.
class GuardTimeout : public std::runtime_error {
 public:
  GuardTimeout(const std::string& what, std::vector<int> missing_ranks)
      : std::runtime_error(what), missing(std::move(missing_ranks)) {}
  std::vector<int> missing;
};

// The guard as the scenario runner uses it; each world makes its own
// (World::call_guard): shared memory between threads, an exchange over MPI.
class CallGuard {
 public:
  virtual ~CallGuard() = default;
  // Before rank's call: returns when every rank's fingerprint of this call
  // agrees with it; throws GuardViolation naming the mismatch otherwise.
  virtual void check(int rank, const CallFingerprint& fp) = 0;
  // Rank's program has ended (its last step done, or an exit step): it
  // issues no call after the last one it checked. A guard that can see every
  // rank may then name the call it will never join at once, instead of the
  // others waiting out their deadline; this one does nothing.
  virtual void ended(int /*rank*/) {}
  // The first mismatch found, and when (seconds from the run's epoch).
  virtual std::optional<Diagnosis> violation() const = 0;
  virtual double violation_time() const = 0;
};

class FingerprintGuard final : public CallGuard {
 public:
  // `settle`: how long a rank that sees a mismatch may wait for more ranks'
  // fingerprints of that call, so that the odd ones out can be told apart.
  FingerprintGuard(int nranks, Clock::time_point epoch, std::chrono::milliseconds settle);
  // Records rank's fingerprint and compares it with every other rank's
  // fingerprint of the same sequence number. Returns at once when they agree.
  // On a mismatch it waits until every rank has posted, or `settle` passes
  // (then the ranks that have not are left out of the finding), and throws
  // GuardViolation naming it.
  void check(int rank, const CallFingerprint& fp) override;
  // The first mismatch found, as a diagnosis over every fingerprint posted for
  // that call by now (after the run: every rank that reached it), and when it
  // was first seen (seconds from the epoch).
  std::optional<Diagnosis> violation() const override;
  double violation_time() const override;
  // Rank's program ended after its last checked call L. When every rank has
  // either checked call L+1 or ended before it, and some rank did enter it,
  // call L+1 can never finish (every member must join a collective): the
  // ranks that ended before it are named missing_rank, and the last rank to
  // arrive (in check, or here) throws GuardViolation, which aborts the
  // others' wait. A rank that never arrives and never ends (a stall) keeps
  // this from firing: the deadline names it then.
  void ended(int rank) override;

 private:
  // The missing-rank finding, if every rank has arrived at the first call an
  // ended rank will never join. mu_ held.
  std::optional<Diagnosis> missing() const;
  std::map<int, uint64_t> last_checked_;  // rank -> the seq of its last check
  std::map<int, uint64_t> ended_;         // rank -> its last seq when its program ended
  int nranks_;
  Clock::time_point epoch_;
  std::chrono::milliseconds settle_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::map<int, CallFingerprint>> table_;
  std::optional<Diagnosis> classify(uint64_t seq) const;  // mu_ held
  std::optional<Diagnosis> violation_;
  double when_ = -1;
};

}  // namespace collcheck
