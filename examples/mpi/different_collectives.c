/* BUG: rank 0 calls MPI_Allreduce while every other rank calls MPI_Bcast on
 * the same step. Under Open MPI 4.1 this hangs silently.
 * collcheck-expect: order_mismatch ranks=[0] */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, v[4] = {1, 2, 3, 4}, out[4];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(v, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* step 1: fine */
  if (rank == 0)
    MPI_Allreduce(v, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  else
    MPI_Bcast(v, 4, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
