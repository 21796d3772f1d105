/* CORRECT: non-blocking collectives overlapped with compute: an
 * MPI_Iallreduce and an MPI_Ibcast in flight together, completed by
 * MPI_Waitall, then an MPI_Ibarrier polled with MPI_Test.
 * collcheck-expect: clean */
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, flag = 0;
  double g[256], s[256], cfg[4] = {0};
  MPI_Request req[2], bar;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (int i = 0; i < 256; ++i) g[i] = rank + i;
  for (int step = 0; step < 5; ++step) {
    MPI_Iallreduce(g, s, 256, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Ibcast(cfg, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req[1]);
    double work = 0;
    for (int i = 0; i < 1000; ++i) work += i * 0.5; /* overlap */
    cfg[0] = work;
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  }
  MPI_Ibarrier(MPI_COMM_WORLD, &bar);
  while (!flag) MPI_Test(&bar, &flag, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
