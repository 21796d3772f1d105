/* BUG: blocking against non-blocking: rank 0 overlaps its all-reduce
 * (MPI_Iallreduce, then MPI_Wait); the others call MPI_Allreduce. MPI-3 says
 * a blocking collective never matches a non-blocking one.
 * collcheck-expect: shape_mismatch ranks=[0] fields=blocking */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  double g[64] = {0}, s[64];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Request req;
    MPI_Iallreduce(g, s, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else {
    MPI_Allreduce(g, s, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
