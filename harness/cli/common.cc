// What every command shares: the --report flag and the seed's parsing.
#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>

#include "harness/cli/commands.h"

namespace collcheck::cli {

void add_report_flag(CLI::App* command, ReportFlags& f) {
  command->add_option("--report", f.specs,
                      "also write the verdicts as FORMAT=PATH (repeatable), atomically; formats: " +
                          [] {
                            std::string s;
                            for (const auto& x : report_formats()) s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", x.name, x.describe);
                            return s;
                          }());
}

void parse_reports(ReportFlags& f) {
  for (const auto& spec : f.specs) {
    try {
      f.requests.push_back(parse_report_request(spec));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
}

int finish_reports(const ReportFlags& f, const Report& r, int code) {
  if (f.requests.empty()) return code;
  try {
    write_reports(f.requests, r);
  } catch (const std::runtime_error& e) {
    // The verdict above stands; a report that could not be written is still an error.
    std::fprintf(stderr, "collcheck: error: --report: %s\n", e.what());
    return code == 0 ? 2 : code;
  }
  return code;
}

std::string mpi_algo_choices() {
  std::string s;
  for (size_t i = 0; i < std::size(kMpiAllreduceAlgos); ++i)
    s += fmt::format("{}{} {}", i ? ", " : "", i, i ? kMpiAllreduceAlgos[i] : "default");
  return s;
}

uint64_t parse_seed(const std::string& text, const std::string& flag) {
  try {
    size_t pos = 0;
    const uint64_t seed = std::stoull(text, &pos, 0);
    if (pos != text.size() || text.empty() || text[0] == '-') throw std::invalid_argument("trailing");
    return seed;
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{} must be a non-negative integer (decimal or 0x hex), got '{}'", flag, text));
  }
}

}  // namespace collcheck::cli
