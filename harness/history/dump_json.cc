// A rank's dump as JSON (the file analyze reads), both ways; what is read is
// checked, never believed.
#include "harness/history/flight_recorder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

namespace collcheck {

namespace {
std::optional<CallState> parse_state(const std::string& s) {
  for (auto st : {CallState::Scheduled, CallState::Started, CallState::Completed, CallState::Waited, CallState::Failed})
    if (call_state_name(st) == s) return st;
  return std::nullopt;
}
}  // namespace

nlohmann::json rank_dump_to_json(const RankDump& d) {
  nlohmann::json j;
  j["rank"] = d.rank;
  j["size"] = d.size;
  j["reason"] = d.reason;
  if (!d.run_id.empty()) j["run"] = {{"id", d.run_id}, {"scenario", d.run_what}};
  if (!d.clock_aligned.empty()) j["clock"] = {{"aligned", d.clock_aligned}, {"uncertainty_s", d.clock_uncertainty_s}};
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
                          {"blocking_matters", c.blocking_matters},
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
  if (j.contains("clock")) {
    const auto& c = j.at("clock");
    d.clock_aligned = c.at("aligned").get<std::string>();
    if (d.clock_aligned.size() > 64) throw std::runtime_error("clock.aligned: longer than 64 characters");
    const auto& u = c.at("uncertainty_s");
    if (!u.is_number() || !(u.get<double>() >= 0 && u.get<double>() < 1e6))
      throw std::runtime_error(fmt::format("clock.uncertainty_s: expected seconds from 0 to 1e6, got {}", u.dump()));
    d.clock_uncertainty_s = u.get<double>();
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
    r.blocking_matters = c.value("blocking_matters", false);
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

}  // namespace collcheck
