// A failure that depends on earlier cases (issue 31, item 2): it fails where
// the cases before it ran, and passes alone in a fresh process, because the
// implementation keeps state across cases (per thread, per world size, per
// communicator). verify records the cases it runs (RecordingExecutor), and
// finds a short list of them that, run first in a fresh process, makes the
// minimal case fail there too (find_earlier_cases). The replay line then runs
// that list before the case (replay_command with `before`: a file of tokens).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "properties/executor.h"

namespace collcheck {

// Forwards to `inner`, keeping the last `keep` cases it ran, in order.
class RecordingExecutor final : public CaseExecutor {
 public:
  RecordingExecutor(CaseExecutor& inner, size_t keep) : inner_(inner), keep_(keep) {}
  CaseOutcome run(const Case& c) override {
    record(c);
    return inner_.run(c);
  }
  size_t parallel() const override { return inner_.parallel(); }
  // Not recorded: a case run ahead side by side is recorded (record) when
  // verify takes its outcome (CaseStream::next), so that the history keeps
  // the order cases are drawn in, whatever order the workers ran them in.
  CaseOutcome run_on(size_t worker, const Case& c) override { return inner_.run_on(worker, c); }
  void record(const Case& c) {
    history_.push_back(c);
    if (history_.size() > keep_) history_.pop_front();
  }
  std::optional<CaseOutcome> run_fresh(const Case& c, std::span<const Case> before = {}) override {
    return inner_.run_fresh(c, before);
  }
  std::string why_no_fresh() const override { return inner_.why_no_fresh(); }
  std::vector<Case> history() const { return {history_.begin(), history_.end()}; }

 private:
  CaseExecutor& inner_;
  size_t keep_;
  std::deque<Case> history_;
};

struct EarlierCases {
  std::vector<Case> cases;  // run these first, in this order, then the minimal case: it fails
  size_t fresh_runs = 0;    // fresh processes the search started
  bool minimal = false;     // no single case of `cases` can be left out (checked one by one)
};

// Searches `history` (the cases run before, oldest first) for a short list
// that makes `c` fail in a fresh process: the whole history first (nullopt if
// even that passes: the state does not come from the cases alone), then the
// shortest suffix, then leaving out chunks and single cases while it still
// fails. At most `max_runs` fresh processes, and none once `stop` says so.
std::optional<EarlierCases> find_earlier_cases(CaseExecutor& exec, const std::vector<Case>& history, const Case& c,
                                               size_t max_runs, const std::function<bool()>& stop);

}  // namespace collcheck
