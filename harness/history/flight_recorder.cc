#include "harness/history/flight_recorder.h"

#include <condition_variable>
#include <filesystem>
#include <set>
#include <thread>

#include "harness/model/atomic_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>


namespace collcheck {

std::string_view call_state_name(CallState s) {
  switch (s) {
    case CallState::Scheduled: return "scheduled";
    case CallState::Started: return "started";
    case CallState::Completed: return "completed";
    case CallState::Waited: return "waited";
    case CallState::Failed: return "failed";
  }
  return "?";
}



namespace {
std::mutex g_live_mu;
std::set<const FlightRecorder*>& live() {
  static auto* s = new std::set<const FlightRecorder*>();  // never destroyed: a crash may come late
  return *s;
}
}  // namespace

// The process's stall meter: one thread while any recorder lives. It sleeps
// kStallTick at a time; a wake-up more than kStallSlack late is a stall.
class StallMeter {
 public:
  static StallMeter& get() {
    static auto* m = new StallMeter();  // never destroyed: a crash may come late
    return *m;
  }
  void acquire() {
    std::lock_guard lk(mu_);
    if (users_++ == 0) {
      // A thread told to stop by the last release may still be finishing;
      // it sees a newer generation than its own and leaves.
      const uint64_t gen = ++generation_;
      threads_.emplace_back([this, gen] { loop(gen); });
    }
  }
  void release() {
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
  std::vector<std::pair<Clock::time_point, Clock::time_point>> since(Clock::time_point from) const {
    std::lock_guard lk(mu_);
    std::vector<std::pair<Clock::time_point, Clock::time_point>> out;
    for (const auto& s : stalls_)
      if (s.second > from) out.push_back(s);
    return out;
  }

 private:
  void loop(uint64_t gen) {
    std::unique_lock lk(mu_);
    while (generation_ == gen) {
      const auto due = Clock::now() + kStallTick;
      cv_.wait_until(lk, due, [&] { return generation_ != gen; });
      if (generation_ != gen) break;
      const auto woke = Clock::now();
      if (woke - due > kStallSlack) {
        stalls_.emplace_back(due, woke);
        if (stalls_.size() > 4096) stalls_.pop_front();
      }
    }
  }
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;  // the running meter (one), until release joins it
  int users_ = 0;
  uint64_t generation_ = 0;
  std::deque<std::pair<Clock::time_point, Clock::time_point>> stalls_;
};

FlightRecorder::FlightRecorder(int rank, int size, Clock::time_point epoch, size_t capacity, size_t transfer_capacity,
                               const FiberHost* host)
    : rank_(rank), size_(size), epoch_(epoch), host_(host), capacity_(capacity),
      transfer_capacity_(transfer_capacity ? transfer_capacity : 4 * capacity) {
  if (host_ == nullptr) StallMeter::get().acquire();
  std::lock_guard lk(g_live_mu);
  live().insert(this);
}

FlightRecorder::~FlightRecorder() {
  {
    std::lock_guard lk(g_live_mu);
    live().erase(this);
  }
  if (host_ == nullptr) StallMeter::get().release();
}

std::vector<Stall> FlightRecorder::stalls() const {
  std::vector<Stall> out;
  if (host_ != nullptr) return out;  // virtual time: the host's stalls are not the run's
  for (const auto& [a, b] : StallMeter::get().since(epoch_))
    out.push_back(Stall{std::chrono::duration<double>(a - epoch_).count(),
                        std::chrono::duration<double>(b - epoch_).count()});
  return out;
}

int dump_live_recorders(const std::string& dir, const std::string& reason, const CrashNote* crash) {
  std::lock_guard lk(g_live_mu);
  int n = 0;
  std::filesystem::create_directories(dir);
  for (const FlightRecorder* r : live()) {
    r->dump(dir, reason, crash);
    ++n;
  }
  return n;
}

double FlightRecorder::now() const {
  return std::chrono::duration<double>((host_ != nullptr ? host_->now() : Clock::now()) - epoch_).count();
}

CallRecord* FlightRecorder::find(uint64_t seq) {
  for (auto it = calls_.rbegin(); it != calls_.rend(); ++it)
    if (it->seq == seq) return &*it;
  return nullptr;
}

void FlightRecorder::scheduled(const CallRecord& r) {
  std::lock_guard<std::mutex> g(mu_);
  calls_.push_back(r);
  // A group's communicator names its root or peer in the group's ranks; the
  // dump says world ranks.
  auto& peer = calls_.back().peer;
  if (peer >= 0 && static_cast<size_t>(peer) < members_.size()) peer = members_[static_cast<size_t>(peer)];
  calls_.back().state = CallState::Scheduled;
  calls_.back().t_scheduled = now();
  if (calls_.size() > capacity_) {
    calls_.pop_front();
    ++dropped_calls_;
  }
}

void FlightRecorder::ended(std::vector<CallRecord> not_run, bool more) {
  std::lock_guard<std::mutex> g(mu_);
  if (not_run.size() > kNotRunKept) {
    not_run.resize(kNotRunKept);
    more = true;
  }
  for (auto& c : not_run) c.state = CallState::Scheduled;
  not_run_ = std::move(not_run);
  not_run_more_ = more;
  ended_ = true;
}

void FlightRecorder::started(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto* c = find(seq)) {
    c->state = CallState::Started;
    c->t_started = now();
  }
}

void FlightRecorder::completed(uint64_t seq, const std::string& error) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto* c = find(seq)) {
    c->state = error.empty() ? CallState::Completed : CallState::Failed;
    c->t_completed = now();
    c->error = error;
  }
}

void FlightRecorder::waited(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto* c = find(seq)) {
    if (c->state == CallState::Completed) c->state = CallState::Waited;
    c->t_waited = now();
  }
}

void FlightRecorder::wrote_buffer(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto* c = find(seq)) c->t_written = now();
}

void FlightRecorder::read_output(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (auto* c = find(seq)) c->t_read = now();
}

void FlightRecorder::blocked(int peer, bool send, Tag tag) {
  std::lock_guard<std::mutex> g(mu_);
  blocked_ = BlockedOn{true, peer, send, tag, now()};
}

void FlightRecorder::unblocked() {
  std::lock_guard<std::mutex> g(mu_);
  blocked_ = BlockedOn{};
}

void FlightRecorder::transfer(const TransferRecord& t) {
  std::lock_guard<std::mutex> g(mu_);
  transfers_.push_back(t);
  if (transfers_.size() > transfer_capacity_) transfers_.pop_front();
}

std::vector<CallRecord> FlightRecorder::calls() const {
  std::lock_guard<std::mutex> g(mu_);
  return {calls_.begin(), calls_.end()};
}

std::vector<TransferRecord> FlightRecorder::transfers() const {
  std::lock_guard<std::mutex> g(mu_);
  return {transfers_.begin(), transfers_.end()};
}

BlockedOn FlightRecorder::blocked_on() const {
  std::lock_guard<std::mutex> g(mu_);
  return blocked_;
}

void FlightRecorder::set_run(std::string id, std::string what) {
  std::lock_guard<std::mutex> g(mu_);
  run_id_ = std::move(id);
  run_what_ = std::move(what);
}

void FlightRecorder::set_group(std::string name, std::vector<int> members, bool p2p, bool caller_progress) {
  std::lock_guard<std::mutex> g(mu_);
  group_ = std::move(name);
  members_ = std::move(members);
  p2p_ = p2p;
  caller_progress_ = caller_progress;
}

std::string dump_file_name(int rank, const std::string& group, bool p2p) {
  return fmt::format("rank-{}{}{}.json", rank, group.empty() ? "" : "." + group, p2p ? ".p2p" : "");
}

RankDump FlightRecorder::to_dump(const std::string& reason, const CrashNote* crash) const {
  RankDump d;
  d.stalls = stalls();
  std::lock_guard<std::mutex> g(mu_);
  d.rank = rank_;
  d.size = size_;
  d.reason = reason;
  d.run_id = run_id_;
  d.run_what = run_what_;
  if (crash) d.crash = *crash;
  d.group = group_;
  d.members = members_;
  d.p2p = p2p_;
  d.caller_progress = caller_progress_;
  d.dumped_at = now();
  d.dropped_calls = dropped_calls_;
  d.calls.assign(calls_.begin(), calls_.end());
  d.ended = ended_;
  if (ended_) d.not_run = not_run_;
  d.rest_known = ended_ && !not_run_more_;
  d.transfers.assign(transfers_.begin(), transfers_.end());
  d.blocked_on = blocked_;
  return d;
}

nlohmann::json FlightRecorder::to_json(const std::string& reason, const CrashNote* crash) const {
  return rank_dump_to_json(to_dump(reason, crash));
}

void FlightRecorder::dump(const std::string& dir, const std::string& reason, const CrashNote* crash) const {
  std::string group;
  bool p2p;
  {
    std::lock_guard<std::mutex> g(mu_);
    group = group_;
    p2p = p2p_;
  }
  write_file_atomically(fmt::format("{}/{}", dir, dump_file_name(rank_, group, p2p)), to_json(reason, crash).dump(1));
}

}  // namespace collcheck
