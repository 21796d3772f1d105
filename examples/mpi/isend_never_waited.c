/* BUG: an MPI_Isend whose request is never waited: the send buffer may be
 * reused before the data left, and the request leaks.
 * collcheck-expect: unwaited_work ranks=[0] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, msg = 42, got;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0) {
    MPI_Request req;
    MPI_Isend(&msg, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &req); /* never waited */
  } else if (rank == 1) {
    MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
