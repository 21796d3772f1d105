/* BUG: a collective called a different number of times: rank 0 runs one
 * more iteration than the others (its loop bound is read from a local file
 * that differs), then waits in an all-reduce nobody else joins.
 * collcheck-expect: missing_rank ranks=list(range(1,n)) */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  float loss = 1.0f, total;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int iters = rank == 0 ? 4 : 3;
  for (int i = 0; i < iters; ++i) MPI_Allreduce(&loss, &total, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
