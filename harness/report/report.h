// What a command found, as plain records, and the sinks that write them.
//
// Every command (verify, faults, replay, sweep, analyze) ends by filling one
// Report: a suite of named verdicts, each passed, failed, an error of the
// harness, or skipped, with a one-line message and a body (the minimal case
// and its replay line, the diagnosis, the row's numbers). A sink renders a
// Report in one format; `--report FORMAT=PATH` (repeatable, on every command)
// asks for one, and the registry below is the one list of formats. A new
// format is one sink file plus one register_report_format row.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace collcheck {

struct ReportCase {
  enum class Status { Passed, Failed, Error, Skipped };
  std::string name;     // "shape_mismatch guarded", "results match the oracle", ...
  Status status = Status::Passed;
  std::string message;  // one line: what failed, or why it was skipped
  std::string detail;   // the body: minimal case, replay line, diagnosis, numbers
  double seconds = 0;
};
// "passed", "failed", "error", "skipped": a verdict's status as the JSON formats write it.
const char* report_status_name(ReportCase::Status s);

// What a run did over time, to look at (the trace format draws it; the
// others leave it out): one track per rank and communicator, the calls,
// transfers, waits, blocked waits and stalls as slices, each diagnosis a mark.
// Commands that ran scenarios (replay, the fault table) fill it from the
// flight recorders' dumps (timeline.h).
struct TimelineSlice {
  size_t track = 0;      // index into TimelineRun::tracks
  std::string name;      // "#3 all_reduce bucket_2", "recv from rank 2", ...
  std::string category;  // call, transfer, wait, blocked, stall, queued
  double start_s = 0, end_s = 0;  // seconds from the run's start
  bool overlaps = false;  // may overlap other slices of its track (a transfer, a wait): drawn apart
  std::vector<std::pair<std::string, std::string>> args;
};
struct TimelineMark {
  std::optional<size_t> track;  // none: the whole run
  std::string name;
  double t_s = 0;
  std::string text;
};
struct TimelineRun {
  std::string name;  // "replay swapped_buckets (guarded)", "late_rank guarded"
  std::vector<std::string> tracks;  // "rank 0", "rank 0 · group stage0", ...
  std::vector<TimelineSlice> slices;
  std::vector<TimelineMark> marks;
};

struct Report {
  std::string command;  // "verify", "faults", ...
  std::string suite;    // "collcheck verify ring": what ran
  std::vector<std::pair<std::string, std::string>> properties;  // seed, cases, world, ...
  std::vector<ReportCase> cases;
  std::vector<TimelineRun> runs;  // empty unless the command ran scenarios
  double seconds = 0;
  size_t count(ReportCase::Status s) const;
};

class EventSink;  // events.h

// A format is either rendered from the Report at the end of the run
// (`render`), or a sink that takes the run's events as they happen
// (`stream`, made before the run with the file's path; events.h).
struct ReportFormat {
  std::string name;      // what --report takes before '='
  std::string describe;  // one line for --help
  std::function<std::string(const Report&)> render;
  std::function<std::shared_ptr<EventSink>(const std::string& path)> stream = {};
};

// The formats, in registration order: junit, text, markdown, trace.
const std::vector<ReportFormat>& report_formats();
// Adds a format (a name already taken throws std::invalid_argument); the other
// removes one, for tests that add a throwaway format.
void register_report_format(ReportFormat f);
void unregister_report_format(std::string_view name);
// The report in one registered format (std::invalid_argument for another).
std::string render_report(std::string_view format, const Report& r);
// "junit, text, markdown": for help and error text.
std::string report_format_choices();
// Each format with what it is, for --help: "jsonl (one JSON line per verdict), ...".
std::string report_format_help();

struct ReportRequest {
  std::string format;
  std::string path;
};
// "FORMAT=PATH". Throws std::invalid_argument naming the allowed formats for an
// unknown format, a missing '=' or an empty path, and naming the file when it
// cannot be created (checked here, before any run, by creating and removing
// PATH.tmp).
ReportRequest parse_report_request(std::string_view text);
// The same check of a file name given by another flag (`flag` names it in the error).
void check_report_path(const std::string& path, std::string_view flag);
// The streaming formats among the requests, each a sink writing its file
// from now on (the others are written by write_reports at the end).
std::vector<std::shared_ptr<EventSink>> open_report_streams(const std::vector<ReportRequest>& requests);
// Renders and writes each end-of-run request atomically (streaming ones were
// written as the run went). Throws std::runtime_error naming
// the file on an I/O failure (the other requests are still written).
void write_reports(const std::vector<ReportRequest>& requests, const Report& r);
// What a supervisor writes when `command` ended with no verdict (a crash, a
// hang, a signal): one error verdict naming `why`, to every FORMAT=PATH of
// `specs` that parses (a bad one the command itself said was bad input), so
// that a CI job reads an error there, never nothing. Errors go to stderr.
void write_no_verdict_reports(const std::string& command, const std::vector<std::string>& specs, const std::string& why);

}  // namespace collcheck
