#include "harness/world/fiber_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <map>
#include <mutex>
#include <tuple>
#include <stdexcept>
#include <vector>

namespace collcheck {

namespace ctx = boost::context;

// A rank's (or a stream's) stack: 1 MiB of address space with a guard page,
// committed only as it is touched.
constexpr size_t kStackBytes = size_t{1} << 20;

// Boost.Context's stack allocator concept over protected stacks that are
// kept for the next fiber instead of unmapped: a verify run spawns p fibers
// per case, and mapping, faulting in and unmapping a fresh stack each time
// was a fifth of its time. At most kKept stacks wait in the pool (their
// touched pages stay committed: tens of KiB each).
class RecycledStack {
 public:
  ctx::stack_context allocate() {
    {
      std::lock_guard lock(mu());
      if (!pool().empty()) {
        const ctx::stack_context s = pool().back();
        pool().pop_back();
        return s;
      }
    }
    return ctx::protected_fixedsize_stack(kStackBytes).allocate();
  }
  void deallocate(ctx::stack_context& s) noexcept {
    {
      std::lock_guard lock(mu());
      if (pool().size() < kKept) {
        pool().push_back(s);
        return;
      }
    }
    ctx::protected_fixedsize_stack(kStackBytes).deallocate(s);
  }

 private:
  static constexpr size_t kKept = 1024;
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<ctx::stack_context>& pool() {
    static auto* p = new std::vector<ctx::stack_context>;  // never destroyed: fibers may outlive statics
    return *p;
  }
};

namespace {
// std::push_heap's order for a min-heap on (time, fiber id).
constexpr auto later = [](const auto& a, const auto& b) { return std::tie(a.at, a.id) > std::tie(b.at, b.id); };
}  // namespace

struct FiberScheduler::Fiber {
  uint64_t id = 0;
  ctx::fiber self;  // the suspended fiber
  ctx::fiber back;  // the scheduler, while the fiber runs
  std::function<void()> fn;
  std::shared_ptr<bool> done = std::make_shared<bool>(false);
  const void* key = nullptr;  // parked on (nullptr: a timer only)
  bool has_timer = false;     // a live entry in timers_, of generation timer_gen, at timer_at
  uint64_t timer_gen = 0;
  Clock::time_point timer_at{};
  // The entry a notify last left stale, while it is still in the heap: the
  // fiber's next wait with the same wake-up time (a call's deadline, which
  // each of its link waits passes) revives it instead of pushing another.
  bool spare = false;
  uint64_t spare_gen = 0;
  Clock::time_point spare_at{};
  bool runnable = true;
  uint64_t priority = 0;  // PCT
  std::map<const void*, std::shared_ptr<void>> locals;  // sched::rank_local
};

std::shared_ptr<void>& FiberScheduler::local_slot(const void* key) {
  if (current_ == nullptr) throw std::logic_error("FiberScheduler::local_slot outside a fiber");
  return current_->locals[key];
}

ScheduleOptions ScheduleOptions::parse(const std::string& spec, uint64_t seed) {
  ScheduleOptions o;
  o.seed = seed;
  if (spec == "random") return o;
  if (spec == "pct") {
    o.policy = SchedulePolicy::Pct;
    return o;
  }
  if (spec.rfind("pct:", 0) == 0) {
    const std::string d = spec.substr(4);
    if (!d.empty() && d.size() <= 2 && std::all_of(d.begin(), d.end(), ::isdigit) && std::stoi(d) >= 1) {
      o.policy = SchedulePolicy::Pct;
      o.pct_depth = std::stoi(d);
      return o;
    }
  }
  throw std::invalid_argument(
      fmt::format("--schedule: '{}' is not a schedule (allowed: random, pct, pct:D with D from 1 to 99)", spec));
}

std::string ScheduleOptions::describe() const {
  return policy == SchedulePolicy::Random ? "random" : fmt::format("pct:{}", pct_depth);
}

FiberScheduler::FiberScheduler(ScheduleOptions opts, Clock::time_point origin)
    : opts_(opts), now_(origin), rng_(opts.seed) {
  plan_changes();
}

void FiberScheduler::plan_changes() {
  change_points_.clear();
  steps_ = 0;
  if (opts_.policy != SchedulePolicy::Pct) return;
  for (int i = 1; i < opts_.pct_depth; ++i) change_points_.push_back(1 + rng_() % std::max<uint64_t>(1, opts_.pct_steps));
  std::sort(change_points_.begin(), change_points_.end());
}

void FiberScheduler::reseed(uint64_t seed) {
  // splitmix64 of the pair: nearby seeds give unrelated schedules.
  uint64_t z = seed ^ (opts_.seed * 0x9e3779b97f4a7c15ULL) ^ 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  rng_.seed(z ^ (z >> 31));
  plan_changes();
}

FiberScheduler::~FiberScheduler() {
  // A fiber still parked (a run whose ranks did not return even after the
  // world aborted them) is abandoned, not unwound: a forced unwind would pass
  // through the rank bodies' catch-alls. Its stack stays mapped, as a hung
  // thread of the thread world stays detached.
  for (auto& f : fibers_)
    if (f->self) new ctx::fiber(std::move(f->self));  // NOLINT: deliberately leaked
}

std::shared_ptr<const bool> FiberScheduler::spawn(std::function<void()> fn) {
  auto f = std::make_unique<Fiber>();
  Fiber* raw = f.get();
  raw->id = next_id_++;
  raw->fn = std::move(fn);
  // PCT: distinct priorities above every change point's (d-1 .. 1).
  raw->priority = static_cast<uint64_t>(opts_.pct_depth) + (rng_() >> 16) * 64 + raw->id % 64;
  raw->self = ctx::fiber(std::allocator_arg, RecycledStack(),
                         [raw](ctx::fiber&& back) {
                           raw->back = std::move(back);
                           raw->fn();  // the caller's body catches what it throws
                           *raw->done = true;
                           return std::move(raw->back);
                         });
  fibers_.push_back(std::move(f));
  runnable_.push_back(raw);
  return raw->done;
}

void FiberScheduler::park(const void* key, Deadline wake) {
  Fiber* f = current_;
  if (f == nullptr) throw std::logic_error("FiberScheduler::park outside a fiber");
  f->runnable = false;
  f->key = key;
  if (key != nullptr) waiters_of(key).fibers.push_back(f);
  if (wake != Deadline::max()) {
    const Clock::time_point at = std::max(wake, now_);
    if (f->spare && f->spare_at == at) {  // the same (time, id) as a new entry: the same order
      f->spare = false;
      f->timer_gen = f->spare_gen;
    } else {
      f->timer_gen = ++next_gen_;
      timers_.push_back(Timer{at, f->id, f, f->timer_gen});
      std::push_heap(timers_.begin(), timers_.end(), later);
    }
    f->timer_at = at;
    f->has_timer = true;
    ++live_timers_;
  }
  if (key == nullptr && wake == Deadline::max()) throw std::logic_error("FiberScheduler::park with nothing to wake it");
  f->back = std::move(f->back).resume();
}

void FiberScheduler::wake(Fiber* f) {
  if (f->runnable) return;
  if (f->has_timer) {  // its entry stays, stale, as the fiber's spare
    f->has_timer = false;
    --live_timers_;
    f->spare = true;
    f->spare_gen = f->timer_gen;
    f->spare_at = f->timer_at;
    if (timers_.size() > 2 * live_timers_ + 256) compact_timers(nullptr);
  }
  if (f->key != nullptr) {
    if (WaitList* w = find_waiters(f->key)) std::erase(w->fibers, f);
    f->key = nullptr;
  }
  f->runnable = true;
  runnable_.push_back(f);
}

void FiberScheduler::notify(const void* key) {
  WaitList* w = find_waiters(key);
  if (w == nullptr || w->fibers.empty()) return;
  woken_.clear();
  woken_.swap(w->fibers);  // the entry keeps the last list's room
  for (Fiber* f : woken_) {
    f->key = nullptr;  // already out of waiters_
    wake(f);  // never notifies: woken_ is not reused under this loop
  }
}

namespace {
size_t slot_of(const void* key, size_t slots) {
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(key) >> 4) * 0x9e3779b97f4a7c15ull) & (slots - 1);
}
}  // namespace

FiberScheduler::WaitList* FiberScheduler::find_waiters(const void* key) {
  for (size_t i = slot_of(key, waiters_.size());; i = (i + 1) & (waiters_.size() - 1)) {
    if (waiters_[i].key == key) return &waiters_[i];
    if (waiters_[i].key == nullptr) return nullptr;
  }
}

FiberScheduler::WaitList& FiberScheduler::waiters_of(const void* key) {
  if (WaitList* w = find_waiters(key)) return *w;
  if (2 * (waiter_keys_ + 1) > waiters_.size()) rebuild_waiters();
  size_t i = slot_of(key, waiters_.size());
  while (waiters_[i].key != nullptr) i = (i + 1) & (waiters_.size() - 1);
  waiters_[i].key = key;
  ++waiter_keys_;
  return waiters_[i];
}

// Keeps the entries with parked fibers (in a table twice as large when they
// take a quarter of it), in slots found anew.
void FiberScheduler::rebuild_waiters() {
  std::vector<WaitList> old;
  old.swap(waiters_);
  size_t live = 0;
  for (const WaitList& w : old) live += !w.fibers.empty();
  size_t slots = old.size();
  while (4 * (live + 1) > slots) slots *= 2;
  waiters_.resize(slots);
  waiter_keys_ = 0;
  for (WaitList& w : old) {
    if (w.fibers.empty()) continue;
    size_t i = slot_of(w.key, slots);
    while (waiters_[i].key != nullptr) i = (i + 1) & (slots - 1);
    waiters_[i] = std::move(w);
    ++waiter_keys_;
  }
}

bool FiberScheduler::stale(const Timer& t) const { return !t.fiber->has_timer || t.fiber->timer_gen != t.gen; }

void FiberScheduler::drop_stale_tops() {
  while (!timers_.empty() && stale(timers_.front())) {
    forget_spare(timers_.front());
    std::pop_heap(timers_.begin(), timers_.end(), later);
    timers_.pop_back();
  }
}

// A stale entry leaves the heap: if it was its fiber's spare, the fiber has none.
void FiberScheduler::forget_spare(const Timer& t) {
  if (t.fiber->spare && t.fiber->spare_gen == t.gen) t.fiber->spare = false;
}

// Rebuilds the heap of the live timers alone; `gone` (a fiber about to be
// freed) must have none, and no entry may point to it after.
void FiberScheduler::compact_timers(const Fiber* gone) {
  std::erase_if(timers_, [&](const Timer& t) {
    if (t.fiber == gone) return true;
    if (!stale(t)) return false;
    forget_spare(t);
    return true;
  });
  std::make_heap(timers_.begin(), timers_.end(), later);
}

FiberScheduler::Fiber* FiberScheduler::pick() {
  size_t i = 0;
  if (opts_.policy == SchedulePolicy::Random) {
    i = static_cast<size_t>(rng_() % runnable_.size());
  } else {
    for (size_t j = 1; j < runnable_.size(); ++j)
      if (runnable_[j]->priority > runnable_[i]->priority) i = j;
  }
  Fiber* f = runnable_[i];
  runnable_[i] = runnable_.back();
  runnable_.pop_back();
  return f;
}

void FiberScheduler::resume(Fiber* f) {
  ++steps_;
  switches_.store(switches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // one writer
  if (opts_.policy == SchedulePolicy::Pct && !change_points_.empty() && steps_ >= change_points_.front()) {
    // A change point: this fiber drops below every other (priorities d-1 .. 1).
    f->priority = static_cast<uint64_t>(change_points_.size());
    change_points_.erase(change_points_.begin());
  }
  current_ = f;
  f->self = std::move(f->self).resume();
  current_ = nullptr;
  if (*f->done) {
    notify(f->done.get());  // a join waits on it
    compact_timers(f);      // its stale entries point to it
    auto it = std::find_if(fibers_.begin(), fibers_.end(), [f](const auto& p) { return p.get() == f; });
    fibers_.erase(it);
  }
}

FiberScheduler::Stop FiberScheduler::run(Clock::time_point until) {
  if (current_ != nullptr) throw std::logic_error("FiberScheduler::run from inside a fiber");
  for (;;) {
    if (fibers_.empty()) return Stop::AllDone;
    if (runnable_.empty()) {
      drop_stale_tops();
      if (timers_.empty()) return Stop::Deadlock;
      const Clock::time_point next = timers_.front().at;
      if (next > until) {
        now_ = std::max(now_, until);
        return Stop::Limit;
      }
      now_ = std::max(now_, next);
      for (drop_stale_tops(); !timers_.empty() && timers_.front().at <= now_; drop_stale_tops()) {
        Fiber* f = timers_.front().fiber;
        std::pop_heap(timers_.begin(), timers_.end(), later);
        timers_.pop_back();
        f->has_timer = false;
        --live_timers_;
        wake(f);
      }
      continue;
    }
    resume(pick());
  }
}

}  // namespace collcheck
