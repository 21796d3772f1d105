/* BUG: the last rank skips an MPI_Barrier (an early "continue" on its
 * shard). The others wait in the barrier forever.
 * collcheck-expect: missing_rank ranks=[n-1] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int step = 0; step < 3; ++step) {
    if (step == 2 && rank == size - 1) continue; /* its shard is empty */
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
