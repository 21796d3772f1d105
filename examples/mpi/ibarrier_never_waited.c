/* BUG: a non-blocking barrier whose request is never completed: the last
 * rank starts an MPI_Ibarrier to overlap it with I/O and forgets the wait.
 * collcheck-expect: unwaited_work ranks=[n-1] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Request req;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  if (rank != size - 1) MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
