// The embedded world: p ranks as threads of this process, linked by the
// in-process transport. Rank threads persist across runs, so that a sweep or a
// grid of thousands of small cases does not pay thread start-up each time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "impl/links.h"

namespace collcheck {

// What one rank's body gets to work with.
class RankContext {
 public:
  virtual ~RankContext() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Links& links() = 0;
  // All ranks meet here; throws std::runtime_error naming the missing ranks if
  // they have not all arrived by `deadline`.
  virtual void barrier(Deadline deadline) = 0;
};

struct RankOutcome {
  bool returned = false;  // the body returned (normally or by throwing)
  bool ok = false;        // ...and did not throw
  std::string error;      // what() of the exception, if any
};

struct WorldRun {
  std::vector<RankOutcome> ranks;
  bool hung = false;  // some rank did not return within the limit
  bool ok() const;
  // One line per failed rank, or "" when everything passed.
  std::string failures() const;
};

class ThreadWorld {
 public:
  explicit ThreadWorld(int nranks);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const;

  using RankFn = std::function<void(RankContext&)>;
  // Runs `fn` on every rank at once and returns when all ranks have returned.
  // When a rank throws, the others' pending transfers are aborted so they fail
  // fast instead of waiting out their deadlines. When ranks are still running
  // after `limit`, the run is reported as hung, naming them; such a world cannot
  // be reused (run() then throws std::logic_error).
  WorldRun run(const RankFn& fn, std::chrono::milliseconds limit);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace collcheck
