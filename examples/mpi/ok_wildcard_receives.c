/* CORRECT: wildcard receives: every rank but 0 reports to rank 0, which
 * receives with MPI_ANY_SOURCE and MPI_ANY_TAG in whatever order they come,
 * then broadcasts the total.
 * collcheck-expect: clean */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, total = 0, v;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    for (int i = 1; i < size; ++i) {
      MPI_Status st;
      MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      total += v;
    }
  } else {
    v = rank * 10;
    MPI_Send(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD);
  }
  MPI_Bcast(&total, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
