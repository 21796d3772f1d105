/* BUG: a send-send deadlock above the eager size: ranks 0 and 1 both send
 * 4 MiB to each other before receiving. Small messages go eagerly and it
 * works in tests; at this size each send waits for a receive never posted.
 * collcheck-expect: deadlock ranks=[0,1] */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  const int n = 1 << 20;
  float* out = calloc(n, sizeof(float));
  float* in = calloc(n, sizeof(float));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank < 2) {
    const int peer = 1 - rank;
    MPI_Send(out, n, MPI_FLOAT, peer, 0, MPI_COMM_WORLD);
    MPI_Recv(in, n, MPI_FLOAT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  free(out);
  free(in);
  MPI_Finalize();
  return 0;
}
