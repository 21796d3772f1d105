// What every command shares: the --report flag and the seed's parsing.
#include <fmt/format.h>

#include <cstdio>
#include <stdexcept>

#include "harness/cli/commands.h"
#include "harness/model/size.h"
#include "harness/world/mpi_world.h"

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
  if (f.capture) *f.capture = r;
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

void refuse_unless_fits(uint64_t need, const std::function<std::string(uint64_t have)>& why) {
  const auto have = memory_available();
  MpiWorld* mpi = MpiWorld::get();
  if (!mpi) {
    if (have && need > *have) throw UsageError(why(*have));
    return;
  }
  // The processes of one node share its memory.
  const uint64_t on_node = static_cast<uint64_t>(mpi->processes_on_node(true));
  const uint64_t node_need = checked_mul(need, on_node).value_or(~uint64_t{0});
  const bool short_here = have && node_need > *have;
  if (!mpi->any_process(short_here)) return;
  if (short_here) throw UsageError(why(*have / on_node) + fmt::format(" (per process: {} processes share this node)", on_node));
  throw UsageError(fmt::format("another node of this job cannot fit the run: {} per process is more than its memory "
                               "available allows (rank 0's node has {} for each of its {} processes)",
                               format_bytes(need), format_bytes(have.value_or(0) / on_node), on_node));
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
