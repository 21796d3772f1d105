/* BUG: a count mismatch after a long run: every step reduces the gradient
 * norm (5,000 steps: each rank's ring of records is full, so each dump is
 * about 3 MB), then the last rank passes one element fewer to the final
 * metrics reduction. The rank that gets MPI_ERR_TRUNCATE ends the job while
 * the others are in the reduction or already writing their dumps in
 * MPI_Finalize: every rank's dump must still be read.
 * collcheck-expect: shape_mismatch ranks=[n-1] fields=count */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  double norm = 1, total, metrics[4] = {1, 2, 3, 4}, out[4];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int step = 0; step < 5000; ++step) MPI_Allreduce(&norm, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(metrics, out, rank == size - 1 ? 3 : 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
