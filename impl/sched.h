// The one place where a rank blocks, sleeps, reads the time or starts a
// concurrent activity. Two implementations sit behind it:
//   - OS threads and the steady clock (the thread and MPI worlds);
//   - fibers on one OS thread with virtual time, driven by a seeded scheduler
//     (the simulated world, harness/world/sim_world.h), installed on the
//     thread that runs it as a FiberHost.
// Every link wait or test, Work wait, guard exchange, stream, sleep or stall
// nemesis and deadline of the project goes through here, so the same code
// runs in both: in the simulated world a wait parks the fiber and virtual time
// moves only when every fiber is parked, so no verdict depends on how busy the
// host is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace collcheck {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// A simulated world's scheduler, as the blocking points see it.
class FiberHost {
 public:
  virtual ~FiberHost() = default;
  // Virtual time.
  virtual Clock::time_point now() const = 0;
  // Whether the calling code runs on one of this host's fibers (the
  // scheduler's own context, between fibers, is not one).
  virtual bool in_fiber() const = 0;
  // Parks the calling fiber until notify(key) or virtual time `wake`
  // (Deadline::max(): only a notify). Returns when the scheduler resumes it.
  virtual void park(const void* key, Deadline wake) = 0;
  // Makes every fiber parked on `key` runnable.
  virtual void notify(const void* key) = 0;
  // Starts fn as a new fiber of this host; done() of the handle says when
  // it returned (fn must not throw: the caller catches).
  virtual std::shared_ptr<const bool> spawn(std::function<void()> fn) = 0;
  // The calling fiber's own slot for `key` (rank_local below).
  virtual std::shared_ptr<void>& local_slot(const void* key) = 0;
};

namespace sched {

// The host installed on this OS thread, or nullptr (threads and the steady clock).
FiberHost* host();
// Installs `h` on this thread until the returned guard is destroyed (the
// previous host comes back).
class HostScope {
 public:
  explicit HostScope(FiberHost* h);
  ~HostScope();
  HostScope(const HostScope&) = delete;
  HostScope& operator=(const HostScope&) = delete;

 private:
  FiberHost* prev_;
};

// Virtual time under a host, the steady clock otherwise.
Clock::time_point now();
// Whether the caller is a simulated world's fiber.
bool in_fiber();

// Blocks until pred() holds (true) or `deadline` passes (then pred() once
// more). `lk` holds cv's mutex on entry and on return. A fiber parks with the
// lock released; a notify_all on the same cv (through sched) wakes it. A
// fiber may come without the lock where nothing but its own thread's fibers
// touch what it guards (InProcFabric::set_one_thread): it parks and returns
// without it.
template <class Pred>
bool wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lk, Deadline deadline, Pred pred) {
  FiberHost* h = host();
  if (h == nullptr || !h->in_fiber()) {
    if (!lk.owns_lock()) lk.lock();
    return cv.wait_until(lk, deadline, pred);
  }
  const bool held = lk.owns_lock();
  while (!pred()) {
    if (h->now() >= deadline) return pred();
    if (held) lk.unlock();
    h->park(&cv, deadline);
    if (held) lk.lock();
  }
  return true;
}
// Without a deadline: for a wait that another bound ends (a stream's queue;
// the simulated world sees a deadlock at once and fails the run).
template <class Pred>
void wait(std::condition_variable& cv, std::unique_lock<std::mutex>& lk, Pred pred) {
  (void)wait_until(cv, lk, Deadline::max(), pred);
}
// What a rank keeps for itself across a blocking point (a scratch buffer):
// one per thread, or per fiber in the simulated world, where ranks share the
// thread. `key` is the address of the caller's own static.
std::shared_ptr<void>& local_slot(const void* key);
template <class T>
T& rank_local(const void* key) {
  auto& slot = local_slot(key);
  if (!slot) slot = std::make_shared<T>();
  return *static_cast<T*>(slot.get());
}

// Wakes every waiter of cv (threads and fibers).
void notify_all(std::condition_variable& cv);

void sleep_until(Deadline t);
void sleep_for(Clock::duration d);
// A spin's turn (a plugin that polls test()): threads yield the CPU; a fiber
// lets the others run, and lets virtual time move on by a microsecond when
// nobody else can.
void yield();

// A concurrent activity (an async stream): an OS thread, or a fiber of the
// host of the thread that starts it.
class Task {
 public:
  Task() = default;
  explicit Task(std::function<void()> fn);
  Task(Task&&) noexcept;
  Task& operator=(Task&&) noexcept;
  ~Task();  // joins
  bool joinable() const;
  void join();

 private:
  std::thread thread_;
  std::shared_ptr<const bool> fiber_done_;
};

}  // namespace sched

// What a simulated world charges for moving and reducing bytes: the α-β
// model. A message between ranks of one node costs alpha_node + bytes *
// beta_node, between nodes alpha_net + bytes * beta_net; a reduction costs
// bytes / reduce_bytes_per_s. Constants, not measured, so that one seed gives
// one output on every machine (docs/simulation.md gives the defaults' sources).
struct LinkModel {
  double alpha_node_s = 1e-6;           // one node: shared memory, ~1 us
  double beta_node_s = 1.0 / 20e9;      // 20 GB/s
  double alpha_net_s = 5e-6;            // between nodes: ~5 us
  double beta_net_s = 1.0 / 12.5e9;     // 100 Gb/s
  double reduce_bytes_per_s = 10e9;     // a reduction kernel's bandwidth
  double launch_s = 2e-6;               // issuing a call (a kernel launch, a library's entry)
  int ranks_per_node = 0;               // 0: every rank on one node
  // The cost of `bytes` from rank a to rank b.
  Clock::duration message(int a, int b, size_t bytes) const;
  Clock::duration reduction(size_t bytes) const;
  // "alpha_node=1us,beta_node=20GB/s,..." (the --link-model value); throws
  // std::invalid_argument naming the key and the allowed ones.
  static LinkModel parse(const std::string& spec);
  std::string describe() const;
};

// The model a simulated world installs on the thread that runs it (nullptr
// otherwise): the kernels charge their reductions to it.
const LinkModel* current_link_model();
void set_current_link_model(const LinkModel* m);
// A call being issued costs the model's launch time in the simulated world
// (nothing elsewhere): calls a rank issues one after another start one after
// another in virtual time too, as they do on a real host.
void charge_launch();

}  // namespace collcheck
