// A body run on a thread of its own, under a limit: a body that never returns
// (a blocking MPI_Allreduce whose peer is gone, a plugin stuck in a loop)
// cannot take the calling thread, which must still report and end the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace collcheck {

class WatchedThread {
 public:
  WatchedThread() { std::thread([s = s_] { loop(s); }).detach(); }
  // True when `fn` returned within `limit`. After false the object must be
  // abandoned (never destroyed while its thread may still run `fn`).
  bool run(std::function<void()> fn, std::chrono::milliseconds limit) {
    std::unique_lock lk(s_->mu);
    s_->fn = std::move(fn);
    s_->done = false;
    s_->cv.notify_all();
    return s_->cv.wait_for(lk, limit, [&] { return s_->done; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> fn;
    bool done = true;
  };
  static void loop(std::shared_ptr<State> s) {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lk(s->mu);
        s->cv.wait(lk, [&] { return static_cast<bool>(s->fn); });
        fn = std::move(s->fn);
        s->fn = nullptr;
      }
      fn();
      std::lock_guard lk(s->mu);
      s->done = true;
      s->cv.notify_all();
    }
  }
  std::shared_ptr<State> s_ = std::make_shared<State>();
};

}  // namespace collcheck
