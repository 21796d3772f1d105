// libFuzzer over the flight-recorder dump loader and the analysis (what
// `collcheck analyze DIR` runs on each rank-<r>.json). Any text either loads
// or throws (exit 2: "not a collcheck flight-recorder dump"); a one-rank dump
// that loads is analyzed, which must finish without crashing.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/check/diagnosis.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  collcheck::RankDump d;
  try {
    d = collcheck::rank_dump_from_json(nlohmann::json::parse(data, data + size));
  } catch (const std::exception&) {
    return 0;
  }
  if (d.size == 1 && d.rank == 0) (void)collcheck::analyze({d}, collcheck::AnalysisOptions{});
  return 0;
}
