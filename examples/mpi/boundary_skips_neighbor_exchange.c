/* BUG: a 1-D non-periodic process line. The left boundary rank has no left
 * neighbour (MPI_PROC_NULL) and its author skipped the neighbourhood
 * exchange there ("nothing to receive"); but MPI_Neighbor_alltoall is
 * collective over the whole Cartesian communicator: rank 0's first call on
 * it is the all-reduce that comes after, while its right neighbour waits in
 * the exchange for data rank 0 never sends.
 * collcheck-expect: order_mismatch ranks=[0] */
#include <mpi.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size, rank, dims[1] = {0}, periods[1] = {0};
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dims[0] = size;
  MPI_Comm line;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
  MPI_Comm_rank(line, &rank);
  int left, right;
  MPI_Cart_shift(line, 0, 1, &left, &right);
  double out[2 * 32] = {0}, in[2 * 32];
  if (left != MPI_PROC_NULL) /* the bug: the boundary skips a collective */
    MPI_Neighbor_alltoall(out, 32, MPI_DOUBLE, in, 32, MPI_DOUBLE, line);
  else
    sleep(1);
  double r = rank;
  MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_DOUBLE, MPI_SUM, line);
  MPI_Comm_free(&line);
  MPI_Finalize();
  return 0;
}
