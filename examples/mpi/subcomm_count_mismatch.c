/* BUG: a count mismatch inside a sub-communicator: ranks are split into
 * even and odd groups (one group below 4 ranks), and the last rank of the
 * first group reduces 2 elements where its group reduces 3.
 * collcheck-expect: shape_mismatch ranks=[(n-1)//2*2 if n>=4 else n-1] fields=count group=split */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, v[3] = {1, 2, 3}, out[3];
  MPI_Comm half;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_split(MPI_COMM_WORLD, size >= 4 ? rank % 2 : 0, rank, &half);
  const int last = size >= 4 ? (size - 1) / 2 * 2 : size - 1;
  MPI_Allreduce(v, out, rank == last ? 2 : 3, MPI_INT, MPI_SUM, half);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
