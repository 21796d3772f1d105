/* BUG: a collective in a rank-conditional branch. Rank 0 broadcasts a
 * refreshed learning rate that only it computes; the others go straight to
 * the gradient all-reduce.
 * collcheck-expect: order_mismatch ranks=[0] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  double lr = 0.1, grad[16] = {0}, sum[16];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int step = 0; step < 3; ++step) {
    if (rank == 0 && step == 1) {
      lr *= 0.5;
      MPI_Bcast(&lr, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* only rank 0 gets here */
    }
    MPI_Allreduce(grad, sum, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
