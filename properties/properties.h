// The properties every all-reduce implementation must satisfy, checked on one
// case. One CaseRunner call executes the case on a thread world (four calls per
// rank: the call, the same call again, the other placement, and async + wait),
// runs the peers on the same inputs, and checks, in this order:
//
//   call-completes               every rank returns without error, before its deadline
//   count-zero-is-noop           count 0 writes nothing and completes
//   no-write-outside-count       the canary bytes around every output are intact
//   input-untouched              an out-of-place call leaves its input as it was
//   agrees-with-oracle           bitwise where the order does not matter, else within the bound
//   ranks-identical              every rank holds identical bits
//   deterministic                the same call again gives the same bits
//   inplace-equals-out-of-place  the other placement gives the same bits
//   async-wait-equals-sync       all_reduce_async + wait() gives the same bits
//   peers-agree                  each peer (the other reference algorithms) agrees:
//                                bitwise where the oracle is bitwise, both within
//                                the bound elsewhere
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/implementation.h"
#include "harness/oracle.h"
#include "harness/thread_world.h"
#include "properties/case.h"

namespace collcheck {

std::vector<std::string_view> property_names();

struct Failure {
  std::string property;  // one of property_names()
  std::string detail;    // readable, multi-line: what differs, where, expected/got/bound
};

struct CaseOutcome {
  bool ok = true;
  Failure failure;
  size_t by_kind[4] = {0, 0, 0, 0};  // elements checked per CheckKind
  double max_err_units = 0;          // worst |result - exact| / bound over bound-checked elements
  double max_peer_diff_units = 0;    // worst |result - peer| / bound over bound-checked elements
  bool world_broken = false;         // a rank never returned: the runner cannot be reused
};

struct RunConfig {
  ImplPtr impl;
  std::vector<ImplPtr> peers;  // compared with impl on every case
  std::chrono::milliseconds timeout{10000};  // per call
};

// The peers a verify run uses by default: the reference algorithms other than
// `impl` (ring for a plugin).
std::vector<ImplPtr> default_peers(const Implementation& impl);

class CaseRunner {
 public:
  explicit CaseRunner(RunConfig cfg);
  ~CaseRunner();
  CaseOutcome run(const Case& c);
  const RunConfig& config() const { return cfg_; }

 private:
  ThreadWorld& world(int p);
  RunConfig cfg_;
  std::map<int, std::unique_ptr<ThreadWorld>> worlds_;
};

}  // namespace collcheck
