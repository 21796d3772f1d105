#include "harness/report/report.h"

#include <fmt/format.h>

#include <filesystem>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "harness/model/atomic_file.h"

namespace collcheck {

const char* report_status_name(ReportCase::Status s) {
  switch (s) {
    case ReportCase::Status::Passed: return "passed";
    case ReportCase::Status::Failed: return "failed";
    case ReportCase::Status::Error: return "error";
    case ReportCase::Status::Skipped: return "skipped";
  }
  return "?";
}

size_t Report::count(ReportCase::Status s) const {
  return static_cast<size_t>(std::count_if(cases.begin(), cases.end(), [&](const ReportCase& c) { return c.status == s; }));
}

// The formats: one row each, naming its sink (a file of its own in this
// folder, which CMake picks up) with its declaration beside it. A new format
// is its sink file and its row here.
std::string render_junit(const Report& r);     // junit.cc
std::string render_text(const Report& r);      // text.cc
std::string render_markdown(const Report& r);  // markdown.cc
std::string render_trace(const Report& r);     // trace.cc
std::shared_ptr<EventSink> json_lines_sink(const std::string& path);  // json_lines.cc

namespace {
std::vector<ReportFormat>& formats() {
  static std::vector<ReportFormat> f{
      {"junit", "JUnit XML: one testsuite, one testcase per verdict (CI test reports)", render_junit},
      {"text", "plain text: one line per verdict, then each failure's body", render_text},
      {"markdown", "Markdown: a verdict table and each failure's body (a CI step summary)", render_markdown},
      {"trace", "Chrome/Perfetto trace (Trace Event Format JSON): a track per rank with calls, transfers, waits and stalls, each diagnosis a mark (open in ui.perfetto.dev or chrome://tracing)", render_trace},
      {"jsonl", "JSON lines, written as the run goes: one object per event (text, case, verdict, finding, row, unit, progress) with its time", nullptr, json_lines_sink},
  };
  return f;
}
}  // namespace

const std::vector<ReportFormat>& report_formats() { return formats(); }

void register_report_format(ReportFormat f) {
  for (const auto& g : formats())
    if (g.name == f.name) throw std::invalid_argument(fmt::format("report format '{}' is already registered", f.name));
  formats().push_back(std::move(f));
}

void unregister_report_format(std::string_view name) {
  std::erase_if(formats(), [&](const ReportFormat& f) { return f.name == name; });
}

std::string report_format_choices() {
  std::string s;
  for (const auto& f : formats()) s += (s.empty() ? "" : ", ") + f.name;
  return s;
}

std::string report_format_help() {
  std::string s;
  for (const auto& f : formats()) s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", f.name, f.describe);
  return s;
}

std::string render_report(std::string_view format, const Report& r) {
  for (const auto& f : report_formats())
    if (f.name == format) {
      if (!f.render) throw std::invalid_argument(fmt::format("report format '{}' streams events; it has no end-of-run rendering", format));
      return f.render(r);
    }
  throw std::invalid_argument(fmt::format("unknown report format '{}'; formats: {}", format, report_format_choices()));
}

ReportRequest parse_report_request(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos)
    throw std::invalid_argument(
        fmt::format("--report: '{}' is not FORMAT=PATH; formats: {}", text, report_format_choices()));
  ReportRequest r{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
  const auto& f = formats();
  if (std::none_of(f.begin(), f.end(), [&](const ReportFormat& x) { return x.name == r.format; }))
    throw std::invalid_argument(
        fmt::format("--report: unknown format '{}'; formats: {}", r.format, report_format_choices()));
  if (r.path.empty()) throw std::invalid_argument(fmt::format("--report: {}= needs a file name", r.format));
  check_report_path(r.path, "--report");
  return r;
}

void check_report_path(const std::string& path, std::string_view flag) {
  // Fail before the run, not after it.
  std::error_code ec;
  if (path.ends_with('/') || std::filesystem::is_directory(path, ec))
    throw std::invalid_argument(fmt::format("{}: '{}' is a directory; give a file, such as {}/report.xml", flag, path,
                                            path.ends_with('/') ? path.substr(0, path.size() - 1) : path));
  const std::string probe = path + ".tmp";
  std::FILE* fp = std::fopen(probe.c_str(), "w");
  if (!fp) throw std::invalid_argument(fmt::format("{}: cannot write '{}': {}", flag, path, std::strerror(errno)));
  std::fclose(fp);
  std::remove(probe.c_str());
}

std::vector<std::shared_ptr<EventSink>> open_report_streams(const std::vector<ReportRequest>& requests) {
  std::vector<std::shared_ptr<EventSink>> sinks;
  for (const auto& q : requests)
    for (const auto& f : formats())
      if (f.name == q.format && f.stream) sinks.push_back(f.stream(q.path));
  return sinks;
}

void write_reports(const std::vector<ReportRequest>& requests, const Report& r) {
  std::string failed;
  for (const auto& q : requests) {
    const auto& f = formats();
    auto it = std::find_if(f.begin(), f.end(), [&](const ReportFormat& x) { return x.name == q.format; });
    try {
      if (it == f.end()) throw std::runtime_error(fmt::format("unknown format '{}'", q.format));
      if (!it->render) continue;  // a stream: written as the run went
      write_file_atomically(q.path, it->render(r));
    } catch (const std::exception& e) {
      failed += (failed.empty() ? "" : "; ") + std::string(e.what());
    }
  }
  if (!failed.empty()) throw std::runtime_error(failed);
}

void write_no_verdict_reports(const std::string& command, const std::vector<std::string>& specs, const std::string& why) {
  std::vector<ReportRequest> requests;
  for (const std::string& spec : specs) {
    try {
      requests.push_back(parse_report_request(spec));
    } catch (const std::exception&) {  // the command said why, as bad input
    }
  }
  Report rep;
  rep.command = command;
  rep.suite = "collcheck " + command;
  rep.cases.push_back({"verdict", ReportCase::Status::Error, "no verdict: " + why, "", 0});
  try {
    write_reports(requests, rep);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collcheck: error: --report: %s\n", e.what());
  }
}

}  // namespace collcheck
