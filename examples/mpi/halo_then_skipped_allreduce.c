/* BUG: a stencil loop. Each step exchanges halos with both neighbours
 * (MPI_Irecv, MPI_Isend, MPI_Waitall, then MPI_Sendrecv for the corners)
 * and all-reduces the residual. On step 3 the last rank has converged
 * locally and skips the all-reduce ("my residual is zero anyway"), then
 * stops: the others wait in the all-reduce it never joins.
 * collcheck-expect: missing_rank ranks=[n-1] */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  const int n = 1 << 16; /* above Open MPI's eager size for TCP and shared memory */
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double* halo_out = calloc(2 * n, sizeof(double));
  double* halo_in = calloc(2 * n, sizeof(double));
  double corner_out = rank, corner_in = 0;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int step = 0; step < 5; ++step) {
    MPI_Request req[4];
    MPI_Irecv(halo_in, n, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(halo_in + n, n, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(halo_out, n, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(halo_out + n, n, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    MPI_Sendrecv(&corner_out, 1, MPI_DOUBLE, right, 2, &corner_in, 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    double local = 1.0 / (step + 1), residual = 0;
    if (step == 3 && rank == size - 1) { /* converged here: the bug */
      sleep(1);
      break;
    }
    MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  free(halo_out);
  free(halo_in);
  MPI_Finalize();
  return 0;
}
