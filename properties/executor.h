// Where property cases execute. In process (fast; what the gtest suites use),
// or isolated in a child process, for implementations that may crash or never
// return (plugins): a crash or a hang then becomes a diagnosed failure of that
// case, the child is replaced, and shrinking goes on.
#pragma once

#include <sys/types.h>

#include <memory>

#include "properties/properties.h"

namespace collcheck {

class CaseExecutor {
 public:
  virtual ~CaseExecutor() = default;
  virtual CaseOutcome run(const Case& c) = 0;
};

class InProcessExecutor final : public CaseExecutor {
 public:
  explicit InProcessExecutor(RunConfig cfg) : runner_(std::move(cfg)) {}
  CaseOutcome run(const Case& c) override { return runner_.run(c); }

 private:
  CaseRunner runner_;
};

// Forks a child that runs cases sent over a pipe. Must be created while the
// process has a single thread (before any world exists), as fork requires.
class IsolatedExecutor final : public CaseExecutor {
 public:
  explicit IsolatedExecutor(RunConfig cfg);
  ~IsolatedExecutor() override;
  CaseOutcome run(const Case& c) override;

 private:
  void start();
  void stop(bool kill_it);
  RunConfig cfg_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

std::unique_ptr<CaseExecutor> make_executor(RunConfig cfg, bool isolate);

// The outcome as one line of JSON, and back (for the pipe to the child).
std::string outcome_to_json(const CaseOutcome& o);
CaseOutcome outcome_from_json(const std::string& line);

}  // namespace collcheck
