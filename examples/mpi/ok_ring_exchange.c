/* CORRECT: a ring halo exchange, large messages, done right: MPI_Irecv
 * and MPI_Isend posted together and completed by MPI_Waitall, then the
 * same with MPI_Sendrecv.
 * collcheck-expect: clean */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  const int n = 1 << 18;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float* out = calloc(n, sizeof(float));
  float* in = calloc(n, sizeof(float));
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Request req[2];
  MPI_Irecv(in, n, MPI_FLOAT, left, 0, MPI_COMM_WORLD, &req[0]);
  MPI_Isend(out, n, MPI_FLOAT, right, 0, MPI_COMM_WORLD, &req[1]);
  MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  MPI_Sendrecv(out, n, MPI_FLOAT, right, 1, in, n, MPI_FLOAT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
