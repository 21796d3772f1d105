/* BUG: the same call with different reduction ops: the last rank asks for
 * the maximum, the others for the sum. MPI runs it and returns a mix.
 * collcheck-expect: shape_mismatch ranks=[n-1] fields=op */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  double v[4] = {1, 2, 3, 4}, out[4];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(v, out, 4, MPI_DOUBLE, rank == size - 1 ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
