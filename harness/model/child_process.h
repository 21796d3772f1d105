// A child process in its own process group, so that a launcher (mpirun) and
// every process it started end together: started with extra environment,
// its output captured in a pipe or passed through, polled without blocking,
// and stopped (SIGTERM to the group, SIGKILL after a grace period). Used by
// the soak's child verify and by `collcheck run`.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace collcheck {

struct ChildProcess {
  pid_t pid = -1;
  int out_fd = -1;  // the read end of its stdout+stderr when captured, else -1
};

// Starts `args` (args[0] found on PATH) with `env` added to this process's
// environment. capture: its stdout and stderr go to a pipe (out_fd); else
// they are this process's. The child dies with this process (PR_SET_PDEATHSIG).
// Throws std::runtime_error when it cannot start (no pipe, no fork, or exec
// failed: "cannot run X: No such file or directory").
ChildProcess start_child(const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env, bool capture);

// How it ended, when it has: its exit code, or -signal. std::nullopt: running.
std::optional<int> poll_child(const ChildProcess& c);

// SIGTERM to its group; SIGKILL after `grace_s`; reaps it. Returns how it
// ended as poll_child does.
int stop_child(const ChildProcess& c, double grace_s);

// Waits for it to end (no deadline: call after stop_child or when it ended).
int wait_child(const ChildProcess& c);

// "a b 'c d'": the command as a shell would take it back, for messages.
std::string command_text(const std::vector<std::string>& args);

}  // namespace collcheck
