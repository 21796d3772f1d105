// The embedded world: p ranks as threads of this process, linked by the
// in-process transport. Rank threads persist across runs, so that a sweep or a
// grid of thousands of small cases does not pay thread start-up each time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/world/inproc_ranks.h"

namespace collcheck {

class ThreadWorld final : public InProcWorld {
 public:
  explicit ThreadWorld(int nranks);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  std::string_view kind() const override { return "threads"; }
  std::string_view how() const override { return "as threads"; }
  int size() const override;
  Clock::time_point start() override { return Clock::now(); }
  // Runs `fn` on every rank at once (or on the first `ranks`, which then see a
  // world of that size, each on its own thread as ever: state a rank's thread
  // keeps outlives one world size, as in a long-lived MPI rank) and returns
  // when all ranks have returned.
  // When a rank throws, the others' pending transfers are aborted so they fail
  // fast instead of waiting out their deadlines. When ranks are still running
  // after `limit`, the run is reported as hung, naming them; such a world cannot
  // be reused (run() then throws std::logic_error).
  WorldRun run(const RankFn& fn, std::chrono::milliseconds limit, int ranks = 0) override;

  // A size mismatch between a send and its receive runs as NCCL runs it (no
  // error: a hang or wrong data) instead of failing at once; see
  // InProcFabric::set_sizes_as_nccl. Unguarded replays turn it on.
  void set_sizes_as_nccl(bool on);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace collcheck
