#include "harness/history/stall_meter.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace collcheck {

namespace {
// A thread's run-queue wait below this within one tick is not a stall: a
// waking thread commonly waits a little for a CPU, and a transfer's latency
// can only grow by the wait that ended as it was seen to complete.
constexpr long long kMinThreadStallNs = 2'000'000;
constexpr size_t kStallsKept = 4096;
constexpr size_t kReadsPerTick = 16;

void keep(std::deque<StallMeter::Span>& d, StallMeter::Span s) {
  // A stretch that overlaps or touches the last one extends it.
  if (!d.empty() && s.first <= d.back().second) {
    d.back().second = std::max(d.back().second, s.second);
    return;
  }
  d.push_back(s);
  if (d.size() > kStallsKept) d.pop_front();
}
}  // namespace

StallMeter& StallMeter::get() {
  static auto* m = new StallMeter();  // never destroyed: a crash may come late
  return *m;
}

pid_t StallMeter::this_thread_id() {
  thread_local const pid_t tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return tid;
}

void StallMeter::acquire() {
  std::lock_guard lk(mu_);
  if (users_++ == 0) {
    // A thread told to stop by the last release may still be finishing;
    // it sees a newer generation than its own and leaves.
    const uint64_t gen = ++generation_;
    threads_.emplace_back([this, gen] { loop(gen); });
  }
}

void StallMeter::release() {
  std::vector<std::thread> done;
  {
    std::lock_guard lk(mu_);
    if (--users_ > 0) return;
    ++generation_;
    done.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : done) t.join();  // the loop notices within one tick
}

StallMeter::Thread* StallMeter::watch(pid_t tid) {
  std::lock_guard lk(mu_);
  auto& w = watched_[tid];
  if (!w) w = std::make_unique<Watched>();
  // A thread id is reused only after its thread ended: an entry whose
  // thread is gone is an earlier thread's, whose stalls stay for its
  // recorders; this thread's are read from a baseline of its own.
  if (w->fd < 0) {
    w->fd = ::open(("/proc/self/task/" + std::to_string(tid) + "/schedstat").c_str(), O_RDONLY | O_CLOEXEC);
    w->gone = false;
    w->delay_ns = -1;
    w->polled = false;
  }
  if (w->fd < 0) {
    if (w->users == 0) watched_.erase(tid);
    return nullptr;
  }
  ++w->users;
  return &w->state;
}

void StallMeter::unwatch(pid_t tid) {
  std::lock_guard lk(mu_);
  const auto it = watched_.find(tid);
  if (it == watched_.end() || --it->second->users > 0) return;
  if (it->second->fd >= 0) ::close(it->second->fd);
  watched_.erase(it);
}

std::vector<StallMeter::Span> StallMeter::since(Clock::time_point from) const {
  std::lock_guard lk(mu_);
  std::vector<Span> out;
  for (const auto& s : stalls_)
    if (s.second > from) out.push_back(s);
  return out;
}

std::vector<StallMeter::Span> StallMeter::thread_since(pid_t tid, Clock::time_point from) const {
  std::lock_guard lk(mu_);
  std::vector<Span> out;
  if (const auto it = watched_.find(tid); it != watched_.end())
    for (const auto& s : it->second->stalls)
      if (s.second > from) out.push_back(s);
  return out;
}

// schedstat's second field grows when a waiting thread gets a CPU, by the
// whole wait: a wait of d ns seen between two reads at a and b ended in
// (a, b], so it lies within [a - d, b]. It is left out when the thread was
// polling a transfer at a and at b and left no wait in between.
// At most kReadsPerTick threads are read a tick, in turn: a world of many
// rank threads (a 512-rank thread world) reads each less often, and the
// meter stays a small part of one core.
void StallMeter::read_threads(std::unique_lock<std::mutex>&) {
  if (watched_.empty()) return;
  auto it = watched_.lower_bound(next_read_);
  for (size_t reads = 0; reads < std::min(kReadsPerTick, watched_.size()); ++reads, ++it) {
    if (it == watched_.end()) it = watched_.begin();
    next_read_ = it->first + 1;
    Watched& w = *it->second;
    if (w.gone) continue;
    const bool polling = w.state.polling.load(std::memory_order_relaxed);
    const uint64_t left = w.state.waits_left.load(std::memory_order_relaxed);
    char buf[128];
    const ssize_t n = ::pread(w.fd, buf, sizeof buf - 1, 0);
    const auto at = Clock::now();
    unsigned long long on_cpu = 0, delay = 0;
    buf[n > 0 ? n : 0] = '\0';
    if (n <= 0 || std::sscanf(buf, "%llu %llu", &on_cpu, &delay) != 2) {
      w.gone = true;  // the thread ended; its stalls stay for its recorders
      ::close(w.fd);
      w.fd = -1;
      continue;
    }
    const long long d = static_cast<long long>(delay);
    const bool waited_anyway = w.polled && polling && left == w.waits_left;
    if (w.delay_ns >= 0 && d - w.delay_ns >= kMinThreadStallNs && !waited_anyway)
      keep(w.stalls, {w.read_at - std::chrono::nanoseconds(d - w.delay_ns), at});
    w.delay_ns = d;
    w.read_at = at;
    w.polled = polling;
    w.waits_left = left;
  }
}

void StallMeter::loop(uint64_t gen) {
  std::unique_lock lk(mu_);
  while (generation_ == gen) {
    const auto due = Clock::now() + kStallTick;
    cv_.wait_until(lk, due, [&] { return generation_ != gen; });
    if (generation_ != gen) break;
    const auto woke = Clock::now();
    if (woke - due > kStallSlack) keep(stalls_, {due, woke});
    read_threads(lk);
  }
}

}  // namespace collcheck
