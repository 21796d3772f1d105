/* CORRECT: several communicators: a 2-D grid split into rows and columns
 * (MPI_Comm_split twice) and a duplicate of the world, each reduced in the
 * same order on every rank, then freed.
 * collcheck-expect: clean */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, v, r1, r2, r3;
  MPI_Comm row, col, dup;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int width = size >= 4 ? 2 : 1;
  MPI_Comm_split(MPI_COMM_WORLD, rank / width, rank, &row);
  MPI_Comm_split(MPI_COMM_WORLD, rank % width, rank, &col);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  v = rank;
  for (int step = 0; step < 3; ++step) {
    MPI_Allreduce(&v, &r1, 1, MPI_INT, MPI_SUM, row);
    MPI_Allreduce(&v, &r2, 1, MPI_INT, MPI_MAX, col);
    MPI_Allreduce(&v, &r3, 1, MPI_INT, MPI_MIN, dup);
  }
  MPI_Comm_free(&row);
  MPI_Comm_free(&col);
  MPI_Comm_free(&dup);
  MPI_Finalize();
  return 0;
}
