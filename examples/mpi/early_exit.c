/* BUG: a rank that exits early: the last rank finds no work and returns
 * from main without MPI_Finalize, while the others enter a reduction.
 * collcheck-expect: missing_rank ranks=[n-1] */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  double x = 1, y;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == size - 1) { /* "nothing to do": it cleans up and leaves */
    sleep(1);
    exit(0);
  }
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
