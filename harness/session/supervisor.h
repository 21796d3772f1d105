// No verdict, no exit 0 (issue 30). A plugin's constructor, a library's init
// or an implementation's call can end the process itself (exit(0), _exit(0))
// before collcheck has judged anything; a CI gate would then go green having
// run nothing. Two guards close that:
// - supervise(): the command runs in a child process and the parent waits for
//   it. The child tells the parent its verdict through a pipe just before it
//   returns from main; a child that ends without one (any exit code, 0
//   included) makes the parent print what happened and exit 3 (no verdict).
//   The parent forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the child, whose
//   process group is its own (a signal sent to the group reaches it once), and
//   dies of the signal that killed the child, if one did. When the parent is
//   killed (SIGKILL), the child is killed too.
// - the exit guard (harness/world/crash_handler.h): exit() called anywhere
//   before the verdict (in the supervised child, an isolated child, or an
//   MPI rank) is exit 3, not the code the caller chose.
#pragma once

#include <functional>
#include <string>

#include "harness/model/exit_codes.h"

namespace collcheck {

// No verdict: the harness's exit code 3 (harness/model/exit_codes.h).
inline constexpr int kExitNoVerdict = kExitHarnessError;

// Forks; returns in the child (the command's process), never in the parent.
// `what` names the command in the parent's message; `no_verdict(why)` runs in
// the parent when the child ended without one (it writes the reports that
// were asked for, each with an error saying why).
void supervise(const std::string& what, const std::function<void(const std::string& why)>& no_verdict);
// The verdict is in: exit() is allowed from now on, and the supervising
// parent, if any, learns that `code` is a verdict.
void verdict_reached(int code);

}  // namespace collcheck
