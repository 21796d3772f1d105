// One stream of typed events from a running job to its sinks.
//
// The rooms that do the work (properties, run, soak) print nothing: they emit
// events. What the user sees is a sink's rendering of them: the console sink
// writes the text events to stdout and stderr, the progress sink draws the
// progress events as a bar or a line every 30 s, and a streaming --report
// format (JSON lines) writes every event as it happens. End-of-run formats
// (JUnit, Markdown, the trace) render the Report the command fills from the
// verdicts (report.h).
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "harness/report/progress.h"
#include "harness/report/report.h"

namespace collcheck {

// What the console shows: a line (or lines) of the command's human output.
// Out is the verdict's stream (stdout); Err carries warnings and notes that
// must not mix with it (stderr).
struct TextEvent {
  enum class To { Out, Err };
  To to = To::Out;
  std::string text;
};
// A case (verify), scenario (faults) or unit (soak) begins.
struct CaseStartedEvent {
  size_t index = 0;  // 1-based
  size_t total = 0;  // 0: not known
  uint64_t seed = 0;
  std::string replay;  // the case's replay token (verify), where it has one
};
// A verdict, as the end-of-run formats list it.
struct VerdictEvent {
  ReportCase verdict;
};
// A diagnosis or a failed property: what was found, and how to replay it.
struct FindingEvent {
  std::string kind;    // "agrees-with-oracle", "skipped_call", ...
  std::string text;    // one line
  std::string replay;  // the command that replays it ("" when none)
};
// A measured row (sweep, gate) or a finished unit (soak): its JSON record,
// the same one the command's --json or results file holds.
struct RowEvent {
  nlohmann::json row;
};
struct UnitEvent {
  nlohmann::json unit;
  // Calls the unit timed, each [impl, op, dtype, bytes, seconds], for the
  // metrics (not kept in a results file); null when none.
  nlohmann::json calls = nullptr;
};
// How far a long run is. Every field set is news; the others stay as they were.
struct ProgressEvent {
  std::optional<std::pair<size_t, size_t>> count = {};  // done of total (0: not known)
  std::optional<double> budget_s = {};                  // a limit on the whole run (0: none)
  std::optional<double> limit_from_now_s = {};          // a limit from now on (0: none)
  std::optional<std::string> phase = {};                // what it does now ("": the plain count)
  bool end = false;  // no more progress: the bar goes (before the summary)
};

using Event = std::variant<TextEvent, CaseStartedEvent, VerdictEvent, FindingEvent, RowEvent, UnitEvent, ProgressEvent>;

// "text", "case", "verdict", "finding", "row", "unit", "progress".
const char* event_name(const Event& e);
// One event as a JSON object: {"event": name, ...its fields}.
nlohmann::json event_json(const Event& e);

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on(const Event& e) = 0;
  // The run's end: a sink flushes here (and reports what it could not write).
  virtual void close() {}
};

// The job's stream: every sink sees every event, in order, one at a time
// (emit may be called from several threads).
class Events {
 public:
  // `first`: before the sinks added so far (a progress bar, which must make
  // way before the console writes).
  void add(std::shared_ptr<EventSink> sink, bool first = false);
  void emit(const Event& e);
  // Closes every sink once; throws the first sink's error (std::runtime_error)
  // after closing the others.
  void close();
  bool empty() const { return sinks_.empty(); }

  template <typename... A>
  void print(fmt::format_string<A...> f, A&&... a) {
    emit(TextEvent{TextEvent::To::Out, fmt::format(f, std::forward<A>(a)...)});
  }
  template <typename... A>
  void warn(fmt::format_string<A...> f, A&&... a) {
    emit(TextEvent{TextEvent::To::Err, fmt::format(f, std::forward<A>(a)...)});
  }
  void progress(ProgressEvent p) { emit(Event(std::move(p))); }

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<EventSink>> sinks_;
  bool closed_ = false;
};

// The text events on the console (`out` for Out, `err` for Err; the other
// events are not text and are left to the other sinks).
std::shared_ptr<EventSink> console_sink(std::FILE* out = stdout, std::FILE* err = stderr);
// The text events appended to `into` (which must outlive the sink): what a
// run said, kept as a unit's detail.
std::shared_ptr<EventSink> text_collector(std::string& into);
// The progress events drawn by a Progress (progress.h) of `what` counting
// `unit`, made at the first progress event; Off: nothing. Lines prints one
// every `line_every`.
std::shared_ptr<EventSink> progress_sink(std::string what, std::string unit, ProgressStyle style,
                                         std::FILE* out = stderr,
                                         std::chrono::milliseconds line_every = std::chrono::seconds(30));

}  // namespace collcheck
