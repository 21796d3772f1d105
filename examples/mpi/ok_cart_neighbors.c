/* CORRECT: a 2-D periodic process grid. Neighborhood collectives on the
 * Cartesian communicator (MPI_Neighbor_allgather, MPI_Ineighbor_alltoall
 * overlapped with compute, MPI_Neighbor_alltoallv), then a persistent halo
 * exchange (MPI_Send_init / MPI_Recv_init, MPI_Startall and MPI_Waitall
 * each step, MPI_Request_free at the end).
 * collcheck-expect: clean */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size, rank, dims[2] = {0, 0}, periods[2] = {1, 1};
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Dims_create(size, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  MPI_Comm_rank(grid, &rank);
  /* 4 neighbours: -x, +x, -y, +y */
  double mine = rank, theirs[4], out[4 * 8] = {0}, in[4 * 8];
  MPI_Neighbor_allgather(&mine, 1, MPI_DOUBLE, theirs, 1, MPI_DOUBLE, grid);
  MPI_Request req;
  MPI_Ineighbor_alltoall(out, 8, MPI_DOUBLE, in, 8, MPI_DOUBLE, grid, &req);
  double work = 0;
  for (int i = 0; i < 1000; ++i) work += i * 0.5; /* compute while it moves */
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  int counts[4] = {1, 1, 2, 2}, displs[4] = {0, 8, 16, 24}; /* what I send to a neighbour, it receives from me */
  MPI_Neighbor_alltoallv(out, counts, displs, MPI_DOUBLE, in, counts, displs, MPI_DOUBLE, grid);
  /* a persistent halo exchange along x */
  int left, right;
  MPI_Cart_shift(grid, 0, 1, &left, &right);
  double halo_out[2][64] = {{0}}, halo_in[2][64];
  MPI_Request halo[4];
  MPI_Recv_init(halo_in[0], 64, MPI_DOUBLE, left, 0, grid, &halo[0]);
  MPI_Recv_init(halo_in[1], 64, MPI_DOUBLE, right, 1, grid, &halo[1]);
  MPI_Send_init(halo_out[0], 64, MPI_DOUBLE, right, 0, grid, &halo[2]);
  MPI_Send_init(halo_out[1], 64, MPI_DOUBLE, left, 1, grid, &halo[3]);
  for (int step = 0; step < 4; ++step) {
    MPI_Startall(4, halo);
    MPI_Waitall(4, halo, MPI_STATUSES_IGNORE);
    MPI_Allreduce(MPI_IN_PLACE, &work, 1, MPI_DOUBLE, MPI_SUM, grid);
  }
  for (int i = 0; i < 4; ++i) MPI_Request_free(&halo[i]);
  MPI_Comm_free(&grid);
  MPI_Finalize();
  return 0;
}
