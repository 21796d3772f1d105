/* BUG: MPI_Allreduce with 4 elements on rank 0 and 8 on the others. Open MPI
 * 4.1 gives rank 0 MPI_ERR_TRUNCATE, returns success with wrong data to the
 * others, and with 4 ranks one of them hangs.
 * collcheck-expect: shape_mismatch ranks=[0] fields=count */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  double v[8] = {0}, out[8];
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Allreduce(v, out, rank == 0 ? 4 : 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
