/* CORRECT: every kind of collective once, with legitimately different
 * per-rank counts where MPI allows them (MPI_Allgatherv, MPI_Alltoallv,
 * MPI_Gatherv) and a derived datatype that matches a basic one.
 * collcheck-expect: clean */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int* a = calloc(64 * size, sizeof(int));
  int* b = calloc(64 * size, sizeof(int));
  int* counts = calloc(size, sizeof(int));
  int* displs = calloc(size, sizeof(int));
  for (int i = 0; i < size; ++i) {
    counts[i] = i + 1;
    displs[i] = i * 8;
  }
  MPI_Reduce(a, b, 4, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Bcast(a, 4, MPI_INT, size - 1, MPI_COMM_WORLD);
  MPI_Gather(a, 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Scatter(a, 2, MPI_INT, b, 2, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Allgather(a, 3, MPI_INT, b, 3, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Allgatherv(a, rank + 1, MPI_INT, b, counts, displs, MPI_INT, MPI_COMM_WORLD);
  MPI_Gatherv(a, rank + 1, MPI_INT, b, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
  int* ones = calloc(size, sizeof(int));
  int* zeros = calloc(size, sizeof(int));
  for (int i = 0; i < size; ++i) { ones[i] = 1; zeros[i] = i; }
  MPI_Alltoallv(a, ones, zeros, MPI_INT, b, ones, zeros, MPI_INT, MPI_COMM_WORLD);
  MPI_Reduce_scatter_block(a, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Scan(a, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(a, b, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Datatype four;
  MPI_Type_contiguous(4, MPI_INT, &four);
  MPI_Type_commit(&four);
  if (rank == 0) MPI_Bcast(a, 1, four, 0, MPI_COMM_WORLD); /* 1 of 4 ints matches 4 ints */
  else MPI_Bcast(a, 4, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Type_free(&four);
  MPI_Barrier(MPI_COMM_WORLD);
  free(a); free(b); free(counts); free(displs); free(ones); free(zeros);
  MPI_Finalize();
  return 0;
}
