/* BUG: two communicators used in opposite orders. Even ranks reduce on the
 * data-parallel communicator first, odd ranks on the model-parallel one:
 * each waits in a collective the other has not reached.
 * collcheck-expect: deadlock ranks=[0,1] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, a = 1, b;
  MPI_Comm dp, mp;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_dup(MPI_COMM_WORLD, &dp);
  MPI_Comm_dup(MPI_COMM_WORLD, &mp);
  if (rank % 2 == 0) {
    MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, dp);
    MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, mp);
  } else {
    MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, mp);
    MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, dp);
  }
  MPI_Comm_free(&dp);
  MPI_Comm_free(&mp);
  MPI_Finalize();
  return 0;
}
