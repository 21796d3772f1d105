// The interposer's life in the program: it starts after MPI_Init (the
// world's communicator named, the dump directory made, the watchdog running),
// writes the dump at MPI_Finalize (and again at exit, for a rank that leaves
// without finalizing), and on MPI_Abort before MPI ends the job.
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "interpose/interpose.h"

namespace collcheck_mpi {
namespace {

std::atomic<bool> started{false}, finalized{false};

void at_exit() {
  if (!started.load() || finalized.load()) return;
  dump("exit: the rank ended without MPI_Finalize");
  watchdog_stop();
}

void start() {
  comms_init();
  watchdog_start();
  started.store(true);
  std::atexit(at_exit);
  if (world_rank() == 0 && std::getenv("COLLCHECK_MPI_QUIET") == nullptr)
    std::fprintf(stderr, "collcheck-mpi: recording %d ranks (%s mode, deadline %.0f s) into %s\n", world_size(),
                 config().guarded ? "guarded" : "unguarded", config().deadline_s, config().dir.c_str());
}

}  // namespace
}  // namespace collcheck_mpi

using namespace collcheck_mpi;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) start();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) start();
  return rc;
}

int MPI_Finalize(void) {
  if (started.load()) dump("finalize");
  blocking_enter(~uint64_t{0});  // MPI_Finalize waits for the others too
  const int rc = PMPI_Finalize();
  blocking_leave();
  finalized.store(true);
  watchdog_stop();
  return rc;
}

int MPI_Abort(MPI_Comm comm, int code) {
  if (started.load()) {
    dump("MPI_Abort");
    mark_job_ending("MPI_Abort");
  }
  return PMPI_Abort(comm, code);
}

}  // extern "C"
