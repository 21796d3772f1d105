// What robustness_test.cc and robustness_memory_test.cc share (one executable).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/run_command.h"

namespace robustness_test {

inline const std::string kDir = SOURCE_DIR "/tests/data/robustness/";

inline testutil::CommandResult replay(const std::string& file) {
  return testutil::run_command(COLLCHECK_BIN " replay " + file, 120);
}

// Exit 2 on one "collcheck: error:" line that says `what`.
inline void expect_usage_error(const testutil::CommandResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("collcheck: error: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "more than one line:\n" << r.out;
}

}  // namespace robustness_test

using namespace robustness_test;
