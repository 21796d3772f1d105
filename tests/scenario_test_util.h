// What the scenario tests share (tests/scenario_*_test.cc, one executable:
// scenario_test).
#pragma once

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "faults/nemesis.h"
#include "harness/run/communicator.h"
#include "harness/report/diagnosis_text.h"
#include "harness/run/scenario_runner.h"
#include "harness/world/thread_world.h"
#include "properties/detection.h"
#include "tests/run_command.h"
#include <string>
#include <vector>


using namespace collcheck;

// AddressSanitizer as gcc (__SANITIZE_ADDRESS__) and clang (__has_feature) say it.
#if defined(__SANITIZE_ADDRESS__)
#define COLLCHECK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COLLCHECK_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define COLLCHECK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLLCHECK_TEST_TSAN 1
#endif
#endif


using namespace std::chrono_literals;

namespace scenario_test {

inline std::string error_of(const std::string& yaml) {
  try {
    const Scenario s = parse_scenario(yaml, "bad.yaml");
    (void)apply_mutators(s);
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(accepted)";
}

inline const char* const kGood = R"(
world: {ranks: 3}
program:
  - all_reduce: {tag: a, count: 10}
  - all_reduce: {tag: b, count: 20, async: true}
)";

inline std::vector<std::string> examples() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(std::string(SOURCE_DIR) + "/examples/bugs"))
    if (e.path().extension() == ".yaml") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// A two-rank scenario file over one of the ABI-fault plugins: its path.
inline std::string plugin_scenario(const std::string& file, const std::string& name, const std::string& plugin, int deadline,
                            const std::string& program) {
  const std::string path = testing::TempDir() + "/" + file + ".yaml";
  std::ofstream(path) << "name: " << name << "\nworld: {ranks: 2}\nimpl: plugin:" PLUGIN_DIR "/" << plugin
                      << ".so\ndeadline: " << deadline << "\nprogram:\n"
                      << program;
  return path;
}

}  // namespace scenario_test

using namespace scenario_test;
