#include "harness/history/flight_recorder.h"

#include <condition_variable>
#include <filesystem>
#include <set>
#include <thread>

#include "harness/model/atomic_file.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
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

namespace {
std::atomic<uint64_t> g_recorder_serial{0};
}  // namespace

FlightRecorder::FlightRecorder(int rank, int size, Clock::time_point epoch, size_t capacity, size_t transfer_capacity,
                               const FiberHost* host)
    : rank_(rank), size_(size), serial_(++g_recorder_serial), epoch_(epoch), host_(host), capacity_(capacity),
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
  if (host_ == nullptr) {
    for (const auto& t : threads_) StallMeter::get().unwatch(t.first);
    StallMeter::get().release();
  }
}

void FlightRecorder::note_thread() {
  if (host_ != nullptr) return;  // fibers: virtual time has no host stalls
  // The recorders this thread has been noted for (by serial: an address may
  // be reused by a later recorder). A thread serves a handful of recorders.
  thread_local std::vector<uint64_t> noted;
  if (std::find(noted.begin(), noted.end(), serial_) != noted.end()) return;
  if (noted.size() >= 64) noted.erase(noted.begin());
  noted.push_back(serial_);
  const pid_t tid = StallMeter::this_thread_id();
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& t : threads_)
      if (t.first == tid) return;
  }
  // Watched once per recorder and thread: only this thread adds itself.
  StallMeter::Thread* state = StallMeter::get().watch(tid);
  if (state == nullptr) return;  // no schedstat here: the process's stalls only
  std::lock_guard<std::mutex> g(mu_);
  threads_.emplace_back(tid, state);
}

// Under mu_.
void FlightRecorder::set_polling(bool polling) {
  if (host_ != nullptr) return;
  const pid_t tid = StallMeter::this_thread_id();
  for (const auto& t : threads_)
    if (t.first == tid) StallMeter::set_polling(t.second, polling);
}

std::vector<Stall> FlightRecorder::stalls() const {
  std::vector<Stall> out;
  if (host_ != nullptr) return out;  // virtual time: the host's stalls are not the run's
  std::vector<StallMeter::Span> spans = StallMeter::get().since(epoch_);
  std::vector<pid_t> tids;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& t : threads_) tids.push_back(t.first);
  }
  for (const pid_t tid : tids) {
    auto t = StallMeter::get().thread_since(tid, epoch_);
    spans.insert(spans.end(), t.begin(), t.end());
  }
  // One sorted list without overlaps: the process's and its threads'.
  std::sort(spans.begin(), spans.end());
  for (const auto& [a, b] : spans) {
    const double lo = std::chrono::duration<double>(a - epoch_).count();
    const double hi = std::chrono::duration<double>(b - epoch_).count();
    if (!out.empty() && lo <= out.back().end) {
      out.back().end = std::max(out.back().end, hi);
    } else {
      out.push_back(Stall{lo, hi});
    }
  }
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
  note_thread();
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
  note_thread();
  std::lock_guard<std::mutex> g(mu_);
  blocked_ = BlockedOn{true, peer, send, tag, now()};
  set_polling(true);
}

void FlightRecorder::unblocked() {
  std::lock_guard<std::mutex> g(mu_);
  blocked_ = BlockedOn{};
  set_polling(false);
}

void FlightRecorder::wait_failed() {
  std::lock_guard<std::mutex> g(mu_);
  set_polling(false);
}

void FlightRecorder::transfer(const TransferRecord& t) {
  note_thread();
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

void FlightRecorder::set_clock(std::string aligned, double uncertainty_s) {
  std::lock_guard<std::mutex> g(mu_);
  clock_aligned_ = std::move(aligned);
  clock_uncertainty_s_ = uncertainty_s;
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
  d.clock_aligned = clock_aligned_;
  d.clock_uncertainty_s = clock_uncertainty_s_;
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
