// The parts of a replay (harness/run/scenario_runner.h) that scenario_runner.cc
// puts together: one rank's program (rank_program.cc: the calls it makes,
// through its faults and recorders, and the waited outputs it keeps for the
// oracle) and the judging of a run (scenario_expect.cc). Private to harness/run.
#pragma once

#include "harness/run/call_data.h"
#include "harness/run/scenario_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "faults/nemesis.h"
#include "harness/run/communicator.h"
#include "harness/world/crash_handler.h"
#include "harness/model/size.h"
#include "harness/model/data.h"
#include "harness/check/guard.h"
#include "harness/check/oracle.h"
#include "harness/model/atomic_file.h"
#include "harness/model/heap.h"

#include <nlohmann/json.hpp>

namespace collcheck {

// A call of at most this many elements over all ranks is checked whole on
// every rank; a larger one on each rank's share (check_outs).
inline constexpr size_t kWholeCheckElements = 16384;

// The waited outputs a rank keeps to check at the end of the run: 128 MiB over
// the ranks of the world, 1 MiB at least (RankResults).
inline uint64_t kept_output_budget(int p) {
  return std::max<uint64_t>((uint64_t{128} << 20) / static_cast<uint64_t>(std::max(p, 1)), uint64_t{1} << 20);
}

struct CallOut {
  CallStep call;
  uint64_t seq = 0;
  uint64_t seed = 0;
  int p = 1, r = 0;  // the group's size and this rank's place in it (p2p: 2 and 0, the data's generator)
  int root = -1;     // broadcast: the root's place in the group
  Bytes out;  // filled whole before it is read: a resize does not zero it
  bool waited = false;
  bool settled = false;  // checked, hashed and its buffer released (RankResults)
  size_t order = 0;      // the rank's n-th call (RankResults)
};

// A kept output against the oracle: nullopt when every element is right.
std::optional<Diagnosis> check_out(int world_rank, const CallOut& c);

// A rank's results: every call's output buffer, each checked against the
// oracle and hashed once its wait has returned, then released. The waited
// outputs are kept while they fit in the rank's budget, and checked at the end
// of the run (a late write into a waited buffer shows); past it, the oldest are
// checked and released as the run goes, so memory stays O(budget + one call),
// not O(sum of counts).
class RankResults {
 public:
  RankResults() = default;
  RankResults(int p, int r, uint64_t budget) : r_(r), budget_(budget ? budget : kept_output_budget(p)) {}

  // A new call's output; its index for waited().
  size_t add(CallOut c) {
    c.order = outs_.size();
    outs_.push_back(std::move(c));
    return outs_.size() - 1;
  }
  CallOut& at(size_t i) { return outs_[i]; }
  // Call i's wait returned: its output is final.
  void waited(size_t i) {
    outs_[i].waited = true;
    kept_ += outs_[i].out.size();
    while (kept_ > budget_ && next_ < outs_.size()) settle_oldest();
  }
  // The end of the rank's program (or its failure): every waited output not
  // yet checked is checked. A call never waited keeps its buffer (the
  // implementation may still write it) and is not judged.
  void finish() {
    for (size_t i = 0; i < outs_.size(); ++i)
      if (outs_[i].waited && !outs_[i].settled) settle(outs_[i]);
  }
  size_t checked() const { return checked_; }
  const std::optional<Diagnosis>& wrong() const { return wrong_; }
  // [group, seq, hash] of each waited all-reduce result, by group and call number.
  nlohmann::json hashes() const {
    nlohmann::json h = nlohmann::json::array();
    for (const auto& [key, hash] : hashes_) h.push_back({key.first, key.second, hash});
    return h;
  }

 private:
  void settle_oldest() {
    for (; next_ < outs_.size(); ++next_)
      if (outs_[next_].waited && !outs_[next_].settled) {
        settle(outs_[next_++]);
        return;
      }
  }
  void settle(CallOut& c) {
    if (c.call.coll != Collective::Send && c.call.coll != Collective::Barrier) ++checked_;
    // The first wrong result in call order is the one reported.
    if (!wrong_ || c.order < wrong_order_)
      if (auto d = check_out(r_, c)) {
        wrong_ = std::move(d);
        wrong_order_ = c.order;
      }
    if (c.call.coll == Collective::AllReduce) hashes_[{c.call.group, c.seq}] = payload_checksum(c.out.data(), c.out.size());
    kept_ -= c.out.size();
    Bytes().swap(c.out);
    c.settled = true;
  }
  int r_ = 0;
  uint64_t budget_ = 0, kept_ = 0;
  size_t wrong_order_ = 0;
  std::vector<CallOut> outs_;  // a settled one holds no buffer
  size_t next_ = 0;            // no output before it is waited and unsettled
  size_t checked_ = 0;
  std::optional<Diagnosis> wrong_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> hashes_;
};

// The communicators a rank takes part in: the world's and each of its process
// groups', in the scenario's order of groups (index 0: the world). Each has a
// recorder for its collectives and one for its point-to-point calls.
struct RankRecorders {
  std::vector<std::string> groups;  // "" first
  std::vector<std::unique_ptr<FlightRecorder>> coll, p2p;
  int index(const std::string& g) const {
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i] == g) return static_cast<int>(i);
    return -1;
  }
  std::vector<FlightRecorder*> all() const {
    std::vector<FlightRecorder*> v;
    for (size_t i = 0; i < coll.size(); ++i) v.insert(v.end(), {coll[i].get(), p2p[i].get()});
    return v;
  }
};

RankRecorders make_recorders(const Scenario& s, int r, Clock::time_point epoch, const FiberHost* host, const std::string& run_id,
                             const std::string& run_what);

// What one rank's program needs from the world it runs in.
struct RankEnv {
  const Scenario& s;
  int rank;
  ImplPtr impl;
  std::chrono::milliseconds timeout;
  RankRecorders& recs;
  RankResults& outs;
  // Guarded mode, or empty: the fingerprint check of a call in a group.
  std::function<void(const std::string& group, const CallFingerprint&)> before_call;
  std::function<void()> stall;  // a stalled rank: wait, never entering the remaining calls
  std::function<void()> ended;  // guarded mode, or empty: the program ended (not failed, not stalled)
  std::vector<FaultTally>& tallies;  // what each fault's links saw and changed here, at the end
};

// One rank's program over `base` (the world's links): faults applied, every
// call recorded, every waited output kept for the oracle.
void run_rank_program(RankEnv& env, Links& base);

// Judging a run (scenario_expect.cc).
std::pair<const RankDump*, const CallRecord*> first_failed_call(const std::vector<RankDump>& dumps);
double first_failure(const std::vector<RankDump>& dumps);
std::string_view op_type(Collective c);
std::string symptom_of(const std::vector<RankDump>& dumps, const std::vector<nlohmann::json>& checked,
                       const std::vector<int>& checked_rank, bool hung, double deadline_s);
bool has_diagnosis(const ReplayResult& r, std::initializer_list<DiagnosisKind> kinds);

}  // namespace collcheck
