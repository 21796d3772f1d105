// The trace format: Chrome's Trace Event Format (JSON), which Perfetto's UI
// (ui.perfetto.dev) and chrome://tracing open. Each scenario run of the
// report is one process, each of its tracks a thread: a call is a complete
// event ("X") on its track (a track's calls never overlap); transfers, waits,
// blocked waits and stalls, which may overlap, are async slices ("b"/"e")
// of the run; each diagnosis is an instant event ("i"), global to the run
// and on each rank it names. The report's verdicts are one more process,
// one slice each, end to end.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "harness/report/report.h"

namespace collcheck {

namespace {

constexpr double kMicros = 1e6;

nlohmann::json args_of(const std::vector<std::pair<std::string, std::string>>& a) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : a) j[k] = v;
  return j;
}

nlohmann::json meta(const char* what, int pid, int tid, const nlohmann::json& args) {
  nlohmann::json e{{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", args}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

std::string render_trace(const Report& r) {
  nlohmann::json events = nlohmann::json::array();
  uint64_t next_id = 1;  // async slices pair their begin and end by id
  int pid = 0;
  for (const TimelineRun& run : r.runs) {
    ++pid;
    events.push_back(meta("process_name", pid, -1, {{"name", run.name}}));
    events.push_back(meta("process_sort_index", pid, -1, {{"sort_index", pid}}));
    for (size_t t = 0; t < run.tracks.size(); ++t) {
      const int tid = static_cast<int>(t) + 1;
      events.push_back(meta("thread_name", pid, tid, {{"name", run.tracks[t]}}));
      events.push_back(meta("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    }
    for (const TimelineSlice& s : run.slices) {
      const int tid = static_cast<int>(s.track) + 1;
      const nlohmann::json args = args_of(s.args);
      if (!s.overlaps) {
        events.push_back({{"ph", "X"}, {"name", s.name}, {"cat", s.category}, {"pid", pid}, {"tid", tid},
                          {"ts", s.start_s * kMicros}, {"dur", (s.end_s - s.start_s) * kMicros}, {"args", args}});
        continue;
      }
      // Async slices are grouped by name in the UI: the track's name in
      // front keeps each rank's apart.
      const std::string name = run.tracks[s.track] + ": " + s.name;
      const uint64_t id = next_id++;
      events.push_back({{"ph", "b"}, {"name", name}, {"cat", s.category}, {"pid", pid}, {"tid", tid},
                        {"id", id}, {"ts", s.start_s * kMicros}, {"args", args}});
      events.push_back({{"ph", "e"}, {"name", name}, {"cat", s.category}, {"pid", pid}, {"tid", tid},
                        {"id", id}, {"ts", s.end_s * kMicros}});
    }
    for (const TimelineMark& m : run.marks) {
      nlohmann::json e{{"ph", "i"}, {"name", m.name}, {"cat", "diagnosis"}, {"pid", pid},
                       {"ts", m.t_s * kMicros}, {"args", {{"text", m.text}}}};
      if (m.track) {
        e["s"] = "t";
        e["tid"] = static_cast<int>(*m.track) + 1;
      } else {
        e["s"] = "p";
        e["tid"] = 1;
      }
      events.push_back(std::move(e));
    }
  }
  // The verdicts, end to end on a track of their own.
  ++pid;
  events.push_back(meta("process_name", pid, -1, {{"name", r.suite.empty() ? "collcheck " + r.command : r.suite}}));
  events.push_back(meta("process_sort_index", pid, -1, {{"sort_index", pid}}));
  events.push_back(meta("thread_name", pid, 1, {{"name", "verdicts"}}));
  double at = 0;
  for (const ReportCase& c : r.cases) {
    const double start = at * kMicros;
    at += std::max(c.seconds, 1e-6);
    events.push_back({{"ph", "X"}, {"name", c.name}, {"cat", report_status_name(c.status)}, {"pid", pid}, {"tid", 1},
                      {"ts", start}, {"dur", at * kMicros - start},
                      {"args", {{"status", report_status_name(c.status)}, {"message", c.message}, {"detail", c.detail}}}});
  }
  nlohmann::json other = {{"command", r.command}, {"suite", r.suite}, {"seconds", r.seconds}};
  for (const auto& [k, v] : r.properties) other[k] = v;
  const nlohmann::json doc{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", other}};
  return doc.dump(1) + "\n";
}

}  // namespace collcheck
