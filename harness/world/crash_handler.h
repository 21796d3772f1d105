// What a process says, and leaves behind, when it crashes.
//
// On SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the handler writes one line to
// stderr naming this process (its MPI rank, pid and host, when set) and what
// it was doing (a verify case and its replay token, a scenario), then asks a
// helper thread, started with the first dump directory, to dump every live
// flight recorder into the crash dump directory (each dump names the rank
// whose thread died and the signal, so `collcheck analyze` can name them),
// waits for it at most two seconds (a crash inside malloc can leave locks held), and finally hands the signal to the
// handler that was there before (AddressSanitizer's, or the default), so the
// process still dies of it. Under mpirun this is the diagnosis of a rank that
// dies: Open MPI then ends the job, and nothing hangs.
#pragma once

#include <string>
#include <string_view>

namespace collcheck {

void install_crash_handler();
// Who this process is ("rank 2 (pid 812 on node7)"); kept for the crash line.
void set_crash_identity(std::string_view who);
// The rank of this process (MPI world), named in the crash dumps.
void set_crash_process_rank(int rank);
// The rank whose work the calling thread does (threads world: a rank's thread,
// or its communicator's async thread); the crash line and dumps name it.
void set_crash_thread_rank(int rank);
// What it is doing now; kept in a fixed buffer (truncated), read by the handler.
void set_crash_context(std::string_view what);
// Where the flight recorders go on a crash ("" = not dumped).
void set_crash_dump_dir(std::string_view dir);

// The exit guard (issue 30): exit() called before the process has its
// verdict (a plugin, or a library it loads, ending the run) is exit 3, no
// verdict, whatever code the caller chose; the line on stderr says so.
void install_exit_guard();
// From now on exit() is this process's own: the verdict is in (main), or
// MPI_Abort carries the verdict's code (Open MPI's abort calls exit()).
void exit_is_verdict();

}  // namespace collcheck
