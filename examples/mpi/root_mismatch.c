/* BUG: a broadcast whose root differs: the last rank believes it owns the
 * checkpoint and broadcasts from itself; the others take rank 0 as root.
 * collcheck-expect: shape_mismatch ranks=[n-1] fields=root */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  long params[32] = {0};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Bcast(params, 32, MPI_LONG, rank == size - 1 ? size - 1 : 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
