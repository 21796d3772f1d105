/* BUG: a persistent halo exchange (MPI_Send_init / MPI_Recv_init, then
 * MPI_Startall and MPI_Waitall every step). On its last step rank 0 takes an
 * early-return path ("nothing changed, skip the wait") and goes on to
 * MPI_Finalize with its requests still active: MPI says every started
 * request must complete, and the buffers may still be in use.
 * collcheck-expect: unwaited_work ranks=[0] */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  double out[16] = {0}, in[16];
  MPI_Request halo[2];
  MPI_Recv_init(in, 16, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &halo[0]);
  MPI_Send_init(out, 16, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &halo[1]);
  for (int step = 0; step < 3; ++step) {
    MPI_Startall(2, halo);
    if (step == 2 && rank == 0) break; /* "nothing changed": the bug */
    MPI_Waitall(2, halo, MPI_STATUSES_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
