// collcheck's exit codes, in one place (docs/ci.md lists them for users).
//   0 pass; 1 a failure found; 2 bad input (usage_error.h);
//   3 no verdict: the harness could not complete the run (threads, memory),
//     or the process ended before a verdict (harness/session/supervisor.h);
//   4 analyze: the dumps cannot decide; 5 an output lost after the run;
//   77 skipped: the run could not happen here (no GPU for nccl), not a pass.
#pragma once

namespace collcheck {

// A run the harness could not complete for want of threads or memory on this
// machine: not a verdict on the implementation.
inline constexpr int kExitHarnessError = 3;
// The dumps cannot decide (what is missing is printed): analyze's exit code.
inline constexpr int kExitUndecided = 4;
// A run whose output could not be written after it ran (a full disk, an I/O
// error): what was found is printed, the file is not whole.
inline constexpr int kExitOutputLost = 5;
// A run that could not happen here (no GPU for nccl): not a pass.
inline constexpr int kExitSkipped = 77;

}  // namespace collcheck
