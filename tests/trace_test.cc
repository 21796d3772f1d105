// The trace report format (issue 32): Chrome's Trace Event Format JSON, which
// Perfetto's UI and chrome://tracing open. The trace of a replay is checked
// against the format's rules (as the importers read them) and against what
// the run did: one track per rank and communicator, the calls as complete
// events, the diagnosis as an instant on the whole run and on the rank it
// names.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/run_command.h"

using nlohmann::json;

namespace {

// What in `doc` breaks the Trace Event Format (JSON object form): every
// event has a phase of the format's and a numeric pid; timed events a
// numeric, finite ts; a complete event ("X") a dur >= 0 and a tid, and the
// complete events of one thread nest (none starts inside another and ends
// after it); async begin and end ("b"/"e") pair by (pid, cat, id), the end
// not before the begin; an instant ("i") has scope g, p or t (t with a
// tid); metadata ("M") names a process or thread with args.name, or sorts
// it with args.sort_index.
std::vector<std::string> trace_problems(const json& doc) {
  std::vector<std::string> bad;
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return {"not an object with a traceEvents array"};
  const std::set<std::string> phases{"X", "B", "E", "b", "e", "n", "i", "I", "M", "C", "s", "t", "f"};
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> complete;
  std::map<std::tuple<int, std::string, uint64_t>, double> open;
  size_t i = 0;
  for (const json& e : doc["traceEvents"]) {
    const std::string at = "event " + std::to_string(i++) + ": ";
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string() || !phases.count(e["ph"].get<std::string>())) {
      bad.push_back(at + "no phase of the format");
      continue;
    }
    const std::string ph = e["ph"];
    if (!e.contains("pid") || !e["pid"].is_number_integer()) bad.push_back(at + "pid missing or not an integer");
    if (!e.contains("name") || !e["name"].is_string()) bad.push_back(at + "name missing");
    if (ph == "M") {
      const std::string n = e.value("name", "");
      const bool names = (n == "process_name" || n == "thread_name") && e["args"].contains("name");
      const bool sorts = (n == "process_sort_index" || n == "thread_sort_index") && e["args"].contains("sort_index");
      if (!names && !sorts) bad.push_back(at + "metadata without its args");
      if (n.rfind("thread_", 0) == 0 && !e.contains("tid")) bad.push_back(at + "thread metadata without tid");
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number() || !std::isfinite(e["ts"].get<double>())) {
      bad.push_back(at + "ts missing or not a finite number");
      continue;
    }
    const double ts = e["ts"];
    const int pid = e.value("pid", -1);
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) bad.push_back(at + "dur missing or negative");
      if (!e.contains("tid")) bad.push_back(at + "complete event without tid");
      complete[{pid, e.value("tid", -1)}].push_back({ts, ts + e.value("dur", 0.0)});
    } else if (ph == "b" || ph == "e") {
      if (!e.contains("id") || !e.contains("cat")) {
        bad.push_back(at + "async event without id or cat");
        continue;
      }
      const auto key = std::make_tuple(pid, e["cat"].get<std::string>(), e["id"].get<uint64_t>());
      if (ph == "b") {
        if (!open.emplace(key, ts).second) bad.push_back(at + "async id begun twice");
      } else if (auto it = open.find(key); it == open.end()) {
        bad.push_back(at + "async end without its begin");
      } else {
        if (ts < it->second) bad.push_back(at + "async end before its begin");
        open.erase(it);
      }
    } else if (ph == "i") {
      const std::string s = e.value("s", "t");
      if (s != "g" && s != "p" && s != "t") bad.push_back(at + "instant scope not g, p or t");
      if (s == "t" && !e.contains("tid")) bad.push_back(at + "thread instant without tid");
    }
  }
  if (!open.empty()) bad.push_back(std::to_string(open.size()) + " async slices never ended");
  for (auto& [thread, spans] : complete) {
    std::sort(spans.begin(), spans.end(), [](auto a, auto b) { return a.first < b.first || (a.first == b.first && a.second > b.second); });
    std::vector<double> stack;  // ends of the enclosing events
    for (const auto& [b, e] : spans) {
      while (!stack.empty() && stack.back() <= b + 1e-3) stack.pop_back();  // 1 ns: rounding
      if (!stack.empty() && e > stack.back() + 1e-3)
        bad.push_back("pid " + std::to_string(thread.first) + " tid " + std::to_string(thread.second) +
                      ": complete events overlap without nesting");
      stack.push_back(e);
    }
  }
  return bad;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

// The checker catches what the importers reject, so that a pass means something.
TEST(Trace, TheFormatCheckRejectsBrokenTraces) {
  EXPECT_FALSE(trace_problems(json::array()).empty());
  const json overlap = json::parse(R"({"traceEvents":[
    {"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":10},
    {"ph":"X","name":"b","pid":1,"tid":1,"ts":5,"dur":10}]})");
  EXPECT_EQ(trace_problems(overlap).size(), 1u) << joined(trace_problems(overlap));
  const json nested = json::parse(R"({"traceEvents":[
    {"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":10},
    {"ph":"X","name":"b","pid":1,"tid":1,"ts":2,"dur":3}]})");
  EXPECT_TRUE(trace_problems(nested).empty()) << joined(trace_problems(nested));
  const json unpaired = json::parse(R"({"traceEvents":[
    {"ph":"b","name":"a","cat":"c","id":1,"pid":1,"tid":1,"ts":3},
    {"ph":"e","name":"a","cat":"c","id":2,"pid":1,"tid":1,"ts":4},
    {"ph":"i","name":"x","s":"q","pid":1,"ts":1},
    {"ph":"Z","name":"x","pid":1,"ts":1}]})");
  EXPECT_EQ(trace_problems(unpaired).size(), 4u) << joined(trace_problems(unpaired));
}

// A replay of the late-arrival report: one track per rank and communicator it
// used, each call a complete event, and the diagnosis an instant on the run
// and on rank 0's track.
TEST(Trace, AReplaysTraceIsValidAndShowsTheRunAndItsDiagnosis) {
  const std::string path = testing::TempDir() + "/late.trace.json";
  const auto r = testutil::collcheck(std::string("replay ") + SOURCE_DIR +
                                     "/examples/bugs/late_rank_after_checkpoint.yaml --report trace=" + path, 120);
  ASSERT_EQ(r.code, 0) << r.out;
  const json doc = json::parse(testutil::slurp(path));
  const auto bad = trace_problems(doc);
  EXPECT_TRUE(bad.empty()) << joined(bad);
  std::map<int, std::string> threads;  // tid -> name, of the run's process (pid 1)
  std::string process;
  size_t calls = 0, transfers = 0;
  std::vector<json> marks;
  for (const json& e : doc["traceEvents"]) {
    if (e["pid"] != 1) continue;
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "process_name") process = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] == "call") ++calls;
    if (e["ph"] == "b" && e["cat"] == "transfer") ++transfers;
    if (e["ph"] == "i") marks.push_back(e);
  }
  EXPECT_EQ(process.rfind("replay rank 0 reaches the stage's all-reduce", 0), 0u) << process;
  EXPECT_NE(process.find("(guarded)"), std::string::npos) << process;
  std::set<std::string> names;
  for (const auto& [tid, n] : threads) names.insert(n);
  for (const char* want : {"rank 0", "rank 1", "rank 2", "rank 3", "rank 0 · group stage0", "rank 3 · p2p"})
    EXPECT_TRUE(names.count(want)) << want;
  EXPECT_GE(calls, 8u);  // every rank's barrier and stage0 all-reduce, at least
  EXPECT_GT(transfers, 0u);
  bool on_run = false, on_rank0 = false;
  for (const json& m : marks) {
    if (m["name"].get<std::string>().rfind("late_rank [rank 0]", 0) != 0) continue;
    on_run = on_run || m["s"] == "p";
    on_rank0 = on_rank0 || (m["s"] == "t" && threads[m["tid"]] == "rank 0");
  }
  EXPECT_TRUE(on_run && on_rank0) << doc.dump(1).substr(0, 4000);
}

// The fault table: one process per row, each with its own diagnosis.
TEST(Trace, TheFaultTablesTraceHasARunPerRow) {
  const std::string path = testing::TempDir() + "/faults.trace.json";
  const auto r = testutil::collcheck("faults --ranks 3 --mode guarded --report trace=" + path, 300);
  ASSERT_EQ(r.code, 0) << r.out;
  const json doc = json::parse(testutil::slurp(path));
  EXPECT_TRUE(trace_problems(doc).empty()) << joined(trace_problems(doc));
  std::set<std::string> processes;
  for (const json& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"]);
  EXPECT_TRUE(processes.count("late_rank guarded")) << doc.dump().substr(0, 2000);
  EXPECT_TRUE(processes.count("mismatched_shape guarded"));
  EXPECT_GE(processes.size(), 10u);  // every nemesis's row, and the verdicts
}
