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
std::optional<CallState> parse_state(const std::string& s) {
  for (auto st : {CallState::Scheduled, CallState::Started, CallState::Completed, CallState::Waited, CallState::Failed})
    if (call_state_name(st) == s) return st;
  return std::nullopt;
}
}  // namespace

uint64_t fnv1a(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
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

FlightRecorder::FlightRecorder(int rank, int size, Clock::time_point epoch, size_t capacity, size_t transfer_capacity)
    : rank_(rank), size_(size), epoch_(epoch), capacity_(capacity),
      transfer_capacity_(transfer_capacity ? transfer_capacity : 4 * capacity) {
  StallMeter::get().acquire();
  std::lock_guard lk(g_live_mu);
  live().insert(this);
}

FlightRecorder::~FlightRecorder() {
  {
    std::lock_guard lk(g_live_mu);
    live().erase(this);
  }
  StallMeter::get().release();
}

std::vector<Stall> FlightRecorder::stalls() const {
  std::vector<Stall> out;
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

double FlightRecorder::now() const { return std::chrono::duration<double>(Clock::now() - epoch_).count(); }

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

nlohmann::json rank_dump_to_json(const RankDump& d) {
  nlohmann::json j;
  j["rank"] = d.rank;
  j["size"] = d.size;
  j["reason"] = d.reason;
  if (!d.run_id.empty()) j["run"] = {{"id", d.run_id}, {"scenario", d.run_what}};
  if (d.crash) j["crash"] = {{"rank", d.crash->rank}, {"signal", d.crash->signal}};
  if (!d.group.empty() || d.p2p) {
    j["group"] = {{"name", d.group}, {"ranks", d.members}, {"p2p", d.p2p}};
    if (d.caller_progress) j["group"]["progress"] = "caller";
  }
  j["dumped_at"] = d.dumped_at;
  j["dropped_calls"] = d.dropped_calls;
  auto call_json = [](const CallRecord& c) {
    return nlohmann::json{{"seq", c.seq},
                          {"collective", std::string(collective_name(c.coll))},
                          {"peer", c.peer},
                          {"tag", c.tag},
                          {"count", c.count},
                          {"dtype", std::string(dtype_name(c.dtype))},
                          {"op", std::string(op_name(c.op))},
                          {"async", c.async},
                          {"impl", c.impl},
                          {"state", std::string(call_state_name(c.state))},
                          {"t_scheduled", c.t_scheduled},
                          {"t_started", c.t_started},
                          {"t_completed", c.t_completed},
                          {"t_waited", c.t_waited},
                          {"t_read", c.t_read},
                          {"t_written", c.t_written},
                          {"error", c.error}};
  };
  auto& calls = j["calls"] = nlohmann::json::array();
  for (const auto& c : d.calls) calls.push_back(call_json(c));
  if (d.ended) {
    auto& rest = j["not_run"] = {{"calls", nlohmann::json::array()}, {"more", !d.rest_known}};
    for (const auto& c : d.not_run) rest["calls"].push_back(call_json(c));
  }
  auto& tr = j["transfers"] = nlohmann::json::array();
  for (const auto& t : d.transfers) {
    tr.push_back({{"src", t.src},
                  {"dst", t.dst},
                  {"tag", t.tag},
                  {"ordinal", t.ordinal},
                  {"bytes", t.bytes},
                  {"t_posted", t.t_posted},
                  {"t_completed", t.t_completed},
                  {"checksum", t.checksum},
                  {"send", t.send}});
  }
  auto& st = j["stalls"] = nlohmann::json::array();
  for (const auto& x : d.stalls) st.push_back({x.begin, x.end});
  j["blocked_on"] = d.blocked_on.blocked ? nlohmann::json{{"peer", d.blocked_on.peer},
                                                          {"send", d.blocked_on.send},
                                                          {"tag", d.blocked_on.tag},
                                                          {"since", d.blocked_on.since}}
                                         : nlohmann::json(nullptr);
  return j;
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

namespace {

// A dump's numbers are checked as they are read: a damaged or hostile dump is
// refused with what is wrong, never believed (a seq of 2^64-1 looped the
// analysis forever, a size of 2^31 took gigabytes, -3 read as 2^64-3).
constexpr int kMaxDumpRanks = 1 << 20;
constexpr uint64_t kMaxSeq = uint64_t{1} << 53;  // exact in a JSON number

template <typename T>
T whole(const nlohmann::json& v, const char* field, T lo, T hi) {
  if (!v.is_number_integer())
    throw std::runtime_error(fmt::format("{}: expected a whole number, got {}", field, v.dump()));
  if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(hi)
                             : (v.get<int64_t>() < static_cast<int64_t>(lo) || v.get<int64_t>() > static_cast<int64_t>(hi)))
    throw std::runtime_error(fmt::format("{}: {} is outside {}..{}", field, v.dump(), lo, hi));
  const T x = v.get<T>();
  if (x < lo) throw std::runtime_error(fmt::format("{}: {} is outside {}..{}", field, v.dump(), lo, hi));
  return x;
}

}  // namespace

RankDump rank_dump_from_json(const nlohmann::json& j) {
  RankDump d;
  d.size = whole<int>(j.at("size"), "size", 1, kMaxDumpRanks);
  d.rank = whole<int>(j.at("rank"), "rank", 0, d.size - 1);
  d.reason = j.value("reason", "");
  if (j.contains("dumped_at") && j["dumped_at"].is_number()) d.dumped_at = j["dumped_at"].get<double>();
  if (j.contains("dropped_calls")) d.dropped_calls = whole<uint64_t>(j["dropped_calls"], "dropped_calls", 0, kMaxSeq);
  if (j.contains("run")) {
    d.run_id = j["run"].at("id").get<std::string>();
    d.run_what = j["run"].at("scenario").get<std::string>();
  }
  if (j.contains("group")) {
    const auto& g = j.at("group");
    d.group = g.at("name").get<std::string>();
    if (d.group.size() > 64) throw std::runtime_error("group.name: longer than 64 characters");
    for (const auto& m : g.at("ranks")) d.members.push_back(whole<int>(m, "group.ranks[]", 0, d.size - 1));
    d.p2p = g.value("p2p", false);
    if (g.contains("progress")) {
      const auto& pr = g.at("progress");
      if (!pr.is_string() || (pr != "caller" && pr != "stream"))
        throw std::runtime_error(fmt::format("group.progress: expected \"stream\" or \"caller\", got {}", pr.dump()));
      d.caller_progress = pr == "caller";
    }
    if (!d.group.empty() && std::find(d.members.begin(), d.members.end(), d.rank) == d.members.end())
      throw std::runtime_error(fmt::format("group.ranks: rank {} dumped group {} but is not one of its ranks", d.rank,
                                           d.group));
  }
  if (j.contains("crash") && !j["crash"].is_null())
    d.crash = CrashNote{whole<int>(j["crash"].at("rank"), "crash.rank", -1, d.size - 1),
                        j["crash"].at("signal").get<std::string>()};
  auto call_from = [&d](const nlohmann::json& c) {
    CallRecord r;
    r.seq = whole<uint64_t>(c.at("seq"), "calls[].seq", 1, kMaxSeq);
    if (c.contains("collective")) {  // absent in older dumps: all-reduces
      auto coll = parse_collective(c.at("collective").get<std::string>());
      if (!coll) throw std::runtime_error(fmt::format("calls[].collective: unknown '{}'; allowed: {}",
                                                      c.at("collective").get<std::string>(), collective_choices()));
      r.coll = *coll;
    }
    r.peer = whole<int>(c.value("peer", nlohmann::json(-1)), "calls[].peer", -1, d.size - 1);
    r.tag = c.at("tag").get<std::string>();
    r.count = whole<size_t>(c.at("count"), "calls[].count", 0, size_t{1} << 48);
    auto t = parse_dtype(c.at("dtype").get<std::string>());
    auto op = parse_op(c.at("op").get<std::string>());
    auto st = parse_state(c.at("state").get<std::string>());
    if (!t || !op || !st) throw std::runtime_error("bad dtype, op or state in a call record");
    r.dtype = *t;
    r.op = *op;
    r.state = *st;
    r.async = c.at("async").get<bool>();
    r.impl = c.value("impl", "");
    r.t_scheduled = c.at("t_scheduled").get<double>();
    r.t_started = c.at("t_started").get<double>();
    r.t_completed = c.at("t_completed").get<double>();
    r.t_waited = c.at("t_waited").get<double>();
    r.t_read = c.value("t_read", -1.0);
    r.t_written = c.value("t_written", -1.0);
    r.error = c.value("error", "");
    return r;
  };
  for (const auto& c : j.at("calls")) {
    CallRecord r = call_from(c);
    // A recorder numbers its calls 1, 2, 3, ... and keeps the latest ones.
    if (!d.calls.empty() && r.seq != d.calls.back().seq + 1)
      throw std::runtime_error(fmt::format("calls[].seq: {} follows {}; a rank's calls are numbered one after another",
                                           r.seq, d.calls.back().seq));
    d.calls.push_back(r);
  }
  if (j.contains("not_run")) {
    const auto& rest = j.at("not_run");
    const auto& list = rest.at("calls");
    if (!list.is_array() || list.size() > kNotRunKept)
      throw std::runtime_error(fmt::format("not_run.calls: at most {} call records", kNotRunKept));
    for (const auto& c : list) d.not_run.push_back(call_from(c));
    d.rest_known = !rest.at("more").get<bool>();
    d.ended = true;
  }
  for (const auto& t : j.at("transfers")) {
    TransferRecord x;
    x.src = whole<int>(t.at("src"), "transfers[].src", 0, d.size - 1);
    x.dst = whole<int>(t.at("dst"), "transfers[].dst", 0, d.size - 1);
    x.tag = whole<Tag>(t.at("tag"), "transfers[].tag", 0, std::numeric_limits<Tag>::max());
    x.ordinal = whole<uint64_t>(t.at("ordinal"), "transfers[].ordinal", 0, kMaxSeq);
    x.bytes = whole<size_t>(t.at("bytes"), "transfers[].bytes", 0, size_t{1} << 48);
    x.t_posted = t.at("t_posted").get<double>();
    x.t_completed = t.at("t_completed").get<double>();
    x.checksum = whole<uint64_t>(t.at("checksum"), "transfers[].checksum", 0, ~uint64_t{0});
    x.send = t.at("send").get<bool>();
    d.transfers.push_back(x);
  }
  if (j.contains("stalls"))
    for (const auto& x : j.at("stalls")) d.stalls.push_back(Stall{x.at(0).get<double>(), x.at(1).get<double>()});
  const auto& b = j.at("blocked_on");
  if (!b.is_null()) {
    d.blocked_on = BlockedOn{true, whole<int>(b.at("peer"), "blocked_on.peer", 0, d.size - 1), b.at("send").get<bool>(),
                             whole<Tag>(b.at("tag"), "blocked_on.tag", 0, std::numeric_limits<Tag>::max()), b.at("since").get<double>()};
  }
  return d;
}

namespace {

class RecordingRequest final : public LinkRequest {
 public:
  RecordingRequest(RequestPtr inner, FlightRecorder& rec, TransferRecord t, std::span<const std::byte> data)
      : inner_(std::move(inner)), rec_(rec), t_(t), data_(data) {}
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait(Deadline deadline) override {
    if (done_) return;
    rec_.blocked(t_.send ? t_.dst : t_.src, t_.send, t_.tag);
    try {
      inner_->wait(deadline);
    } catch (...) {
      // Stay "blocked" in the record: the dump shows what this rank was waiting for.
      throw;
    }
    rec_.unblocked();
    finish();
  }

 private:
  void finish() {
    done_ = true;
    t_.t_completed = rec_.now();
    t_.checksum = fnv1a(data_.data(), data_.size());
    rec_.transfer(t_);
  }
  RequestPtr inner_;
  FlightRecorder& rec_;
  TransferRecord t_;
  std::span<const std::byte> data_;
  bool done_ = false;
};

class RecordingLinks final : public LinksDecorator {
 public:
  RecordingLinks(Links& inner, FlightRecorder& rec) : LinksDecorator(inner), rec_(rec) {}
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override {
    TransferRecord t{rank(), peer, tag, ordinal_[{peer, tag, true}]++, data.size(), rec_.now(), -1, 0, true};
    return std::make_unique<RecordingRequest>(inner_.isend(peer, tag, data), rec_, t, data);
  }
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    TransferRecord t{peer, rank(), tag, ordinal_[{peer, tag, false}]++, data.size(), rec_.now(), -1, 0, false};
    return std::make_unique<RecordingRequest>(inner_.irecv(peer, tag, data), rec_, t, data);
  }

 private:
  FlightRecorder& rec_;
  std::map<std::tuple<int, Tag, bool>, uint64_t> ordinal_;
};

}  // namespace

std::unique_ptr<Links> recording_links(Links& inner, FlightRecorder& rec) {
  return std::make_unique<RecordingLinks>(inner, rec);
}

}  // namespace collcheck
