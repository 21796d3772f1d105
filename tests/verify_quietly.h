// run_verify as the tests that judge its VerifyResult call it: the run's
// text goes to /dev/null, its warnings to stderr.
#pragma once

#include <cstdio>

#include "harness/report/events.h"
#include "properties/executor.h"
#include "properties/verify.h"

namespace testutil {

inline collcheck::VerifyResult run_verify_quietly(const collcheck::VerifyOptions& o, collcheck::CaseExecutor& exec) {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  collcheck::Events events;  // the run's text on devnull
  events.add(collcheck::console_sink(devnull, stderr));
  collcheck::VerifyResult r = collcheck::run_verify(o, exec, events);
  std::fclose(devnull);
  return r;
}

}  // namespace testutil
