// The per-world-size communicators of a collective library that this process
// holds (NCCL: p communicators in the thread world, one in the MPI world), and
// the rule that makes aborting them safe.
//
// NCCL frees every communicator of an in-process group when the last of them is
// aborted (commReclaim), so aborting while another rank thread still polls its
// communicator is a use after free. Here a failing rank only marks its group
// failed; the ranks still inside a call see the mark at their next poll and
// leave; the last one out aborts the group, exactly once, and drops it, so the
// next call creates a fresh one. A creation that throws caches nothing.
//
// No CUDA or NCCL in here: tests/comm_groups_test.cc checks the rule with
// plain threads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace collcheck {

template <typename State>
class CommGroups {
 public:
  // Aborts every communicator of a group; called once per failed or reset
  // group, with no rank inside a call.
  using Abort = std::function<void(State&)>;
  explicit CommGroups(Abort abort) : abort_(std::move(abort)) {}
  CommGroups(const CommGroups&) = delete;
  CommGroups& operator=(const CommGroups&) = delete;

  struct Group {
    std::unique_ptr<State> state;
    int inside = 0;                  // ranks inside a call (under the mutex)
    std::atomic<bool> failed{false};
    std::string why;                 // the first failure (under the mutex)
  };

  // One rank's call on a group: leaving it (the destructor) aborts the group if
  // it failed and this was the last rank inside.
  class Call {
   public:
    Call(CommGroups* owner, int p, std::shared_ptr<Group> g) : owner_(owner), p_(p), g_(std::move(g)) {}
    Call(Call&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), p_(o.p_), g_(std::move(o.g_)) {}
    Call(const Call&) = delete;
    ~Call() {
      if (owner_) owner_->leave(p_, g_);
    }
    State& state() const { return *g_->state; }
    // Marks the group failed: every rank inside leaves at its next poll.
    void fail(const std::string& why) const {
      std::lock_guard lk(owner_->mu_);
      if (!g_->failed.exchange(true)) g_->why = why;
    }
    bool failed() const { return g_->failed.load(); }
    std::string why() const {
      std::lock_guard lk(owner_->mu_);
      return g_->why;
    }

   private:
    CommGroups* owner_;
    int p_;
    std::shared_ptr<Group> g_;
  };

  // Enters a call on the group of world size p, creating it with `create` if
  // there is none. `create` runs under the lock (the other ranks of the process
  // wait for it) and may throw: nothing is cached then. Throws if the group of p
  // failed and ranks are still inside its call.
  template <typename Create>
  Call enter(int p, Create&& create) {
    std::lock_guard lk(mu_);
    auto it = groups_.find(p);
    if (it != groups_.end() && it->second->failed.load())
      throw std::runtime_error("the previous call of this world failed and some of its ranks have not left it yet (" +
                               it->second->why + ")");
    if (it == groups_.end()) {
      auto g = std::make_shared<Group>();
      g->state = create();  // throws: nothing cached
      it = groups_.emplace(p, std::move(g)).first;
    }
    ++it->second->inside;
    return Call(this, p, it->second);
  }

  // Drops the group of p (aborting it) if no rank is inside; else marks it
  // failed so that the last rank out aborts it.
  void reset(int p, const std::string& why = "reset") {
    std::unique_lock lk(mu_);
    auto it = groups_.find(p);
    if (it == groups_.end()) return;
    auto g = it->second;
    if (!g->failed.exchange(true)) g->why = why;
    if (g->inside > 0) return;
    groups_.erase(it);
    lk.unlock();
    abort_(*g->state);
  }

  bool cached(int p) const {
    std::lock_guard lk(mu_);
    return groups_.count(p) > 0;
  }

 private:
  void leave(int p, const std::shared_ptr<Group>& g) {
    std::unique_lock lk(mu_);
    if (--g->inside > 0 || !g->failed.load()) return;
    auto it = groups_.find(p);
    if (it != groups_.end() && it->second == g) groups_.erase(it);
    lk.unlock();
    abort_(*g->state);
  }

  Abort abort_;
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<Group>> groups_;
};

}  // namespace collcheck
