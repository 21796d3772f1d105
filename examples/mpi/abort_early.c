/* BUG: a rank that aborts early: rank 1 fails to open its input and calls
 * MPI_Abort while the others are in a barrier.
 * collcheck-expect: missing_rank ranks=[1] */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 1 && fopen("/nonexistent/collcheck-input", "r") == NULL) {
    sleep(1); /* logs and retries first */
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
