/* BUG: a data-dependent early stop: rank 1 decides locally that it has
 * converged and leaves the training loop; the others keep all-reducing.
 * collcheck-expect: missing_rank ranks=[1] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  double loss, sum;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int step = 0; step < 5; ++step) {
    loss = rank == 1 ? 0.25 / (step + 1) : 1.0;
    if (loss < 0.2) break; /* local decision: should have been reduced first */
    MPI_Allreduce(&loss, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
