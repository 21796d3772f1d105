/* BUG: the same count, different datatypes: the last rank sums its
 * histogram as MPI_FLOAT, the others as MPI_INT (both 4 bytes: MPI does not
 * notice, and the sums are garbage).
 * collcheck-expect: shape_mismatch ranks=[n-1] fields=dtype */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, hist[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(hist, out, 8, rank == size - 1 ? MPI_FLOAT : MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
