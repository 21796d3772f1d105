/* BUG: communicators freed in different orders on different ranks. A
 * library keeps the communicators it made in a table and frees them at
 * shutdown in the table's order, which here depends on the rank (think of a
 * hash table keyed by handle values that differ per process). MPI_Comm_free
 * is collective: an MPI that synchronizes in it deadlocks; Open MPI frees
 * locally and the job "works" until it runs on one that does.
 * collcheck-expect: deadlock ranks=[0,1] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, a = 1, b;
  MPI_Comm table[2];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_dup(MPI_COMM_WORLD, &table[0]); /* the data-parallel communicator */
  MPI_Comm_dup(MPI_COMM_WORLD, &table[1]); /* the checkpoint communicator */
  MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, table[0]);
  MPI_Barrier(table[1]);
  const int first = rank == 0 ? 1 : 0; /* the table's order on this rank */
  MPI_Comm_free(&table[first]);
  MPI_Comm_free(&table[1 - first]);
  MPI_Finalize();
  return 0;
}
