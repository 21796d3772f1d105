// Where property cases execute. In process (fast; what the gtest suites use),
// or isolated in a child process, for implementations that may crash or never
// return (plugins): a crash or a hang then becomes a diagnosed failure of that
// case, the child is replaced, and shrinking goes on.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/report/events.h"
#include "properties/properties.h"

namespace collcheck {

class CaseExecutor {
 public:
  virtual ~CaseExecutor() = default;
  virtual CaseOutcome run(const Case& c) = 0;
  // Workers that may run cases side by side (1: one at a time).
  virtual size_t parallel() const { return 1; }
  // Runs `c` on worker `worker` (0 to parallel() - 1): each worker from one
  // thread at a time, the workers at once from threads of their own.
  virtual CaseOutcome run_on(size_t /*worker*/, const Case& c) { return run(c); }
  // Runs `c` once in a fresh process (no earlier case's state: no thread, no
  // thread_local, no cache the implementation kept), after the cases `before`
  // in that process (their outcomes are not kept), or nullopt where that
  // cannot be done (the MPI world). verify's test of a steady failure, and its
  // search for the earlier cases a failure needs.
  virtual std::optional<CaseOutcome> run_fresh(const Case&, std::span<const Case> /*before*/ = {}) {
    return std::nullopt;
  }
  // Why run_fresh cannot be done here, for the report.
  virtual std::string why_no_fresh() const { return "the MPI world"; }
  // Asked while a case runs, where the executor can cut a case short (the
  // isolated child is killed within 0.2 s): true ends the case with an
  // `interrupted` outcome. In process and in the MPI world a case ends by its
  // own deadlines. run_verify sets it to its should_stop for the run.
  void set_should_stop(std::function<bool()> f) { should_stop_ = std::move(f); }

 protected:
  bool stop_asked() const { return should_stop_ && should_stop_(); }

 private:
  std::function<bool()> should_stop_;
};

class InProcessExecutor final : public CaseExecutor {
 public:
  explicit InProcessExecutor(RunConfig cfg);
  CaseOutcome run(const Case& c) override { return runner_.run(c); }
  size_t parallel() const override { return 1 + more_.size(); }
  // Worker 0 is run()'s runner; each other worker has a runner of its own.
  CaseOutcome run_on(size_t worker, const Case& c) override {
    return worker == 0 ? runner_.run(c) : more_.at(worker - 1)->run(c);
  }
  std::string why_no_fresh() const override;
  std::optional<CaseOutcome> run_fresh(const Case& c, std::span<const Case> before = {}) override;

 private:
  CaseRunner runner_;
  std::vector<std::unique_ptr<CaseRunner>> more_;  // workers 1 to parallel() - 1
};

// Forks a child that runs cases sent over a pipe. Must be created while the
// process has a single thread (before any world exists), as fork requires.
class IsolatedExecutor final : public CaseExecutor {
 public:
  explicit IsolatedExecutor(RunConfig cfg);
  ~IsolatedExecutor() override;
  CaseOutcome run(const Case& c) override;
  std::optional<CaseOutcome> run_fresh(const Case& c, std::span<const Case> before = {}) override;

 private:
  void start();
  void stop(bool kill_it);
  RunConfig cfg_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

std::unique_ptr<CaseExecutor> make_executor(RunConfig cfg, bool isolate);

// Thrown by WorldExecutor::run when a rank never returned or never answered:
// the world is lost (no further case can run in it), and the outcome it
// carries is final.
class WorldLost : public std::runtime_error {
 public:
  WorldLost(const std::string& what, CaseOutcome o) : std::runtime_error(what), outcome(std::move(o)) {}
  CaseOutcome outcome;
};

// Cases in one World whose every process takes part (the MPI world). The root
// drives: it generates and shrinks (RapidCheck runs only there), broadcasts
// each case as its replay token (seeded inputs are rebuilt on every rank,
// explicit ones travel in the token), and every process runs its ranks of the
// case (run_case), which the root checks. The other processes serve cases
// (serve_cases) until the root says stop, and exit with the code it sends, so
// the exit code is the same on every rank.
class WorldExecutor final : public CaseExecutor {
 public:
  WorldExecutor(World& world, RunConfig cfg) : world_(world), cfg_(std::move(cfg)) {}
  CaseOutcome run(const Case& c) override;
  // Tells every other process to return `code` from serve_cases.
  void stop(int code);
  const Case& last_case() const { return last_; }

 private:
  World& world_;
  RunConfig cfg_;
  Case last_;
};

// The loop of every process but the root's. Returns the code the root sent,
// or nullopt when the root said nothing for longer than any case could take
// (the caller ends the job).
// What went wrong (no command within the idle limit, a malformed one) is a
// warning event on `ev`, and the result is empty.
std::optional<int> serve_cases(World& world, const RunConfig& cfg, Events& ev);

// The outcome as one line of JSON, and back (for the pipe to the child).
std::string outcome_to_json(const CaseOutcome& o);
CaseOutcome outcome_from_json(const std::string& line);

}  // namespace collcheck
