/* The overhead benchmark's program (ci/bench-mpi): MPI_Allreduce in a loop,
 * timed by MPI_Wtime around the loop, after warm-up calls.
 * usage: allreduce_loop BYTES ITERATIONS
 * Rank 0 prints: "<bytes> <iterations> <seconds per call>". */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
  const int iters = argc > 2 ? atoi(argv[2]) : 1000;
  const int n = (int)(bytes / sizeof(float)) > 0 ? (int)(bytes / sizeof(float)) : 1;
  float* in = calloc((size_t)n, sizeof(float));
  float* out = calloc((size_t)n, sizeof(float));
  for (int i = 0; i < 10; ++i) MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const double t = MPI_Wtime() - t0;
  double worst;
  MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("%ld %d %.9f\n", (long)n * (long)sizeof(float), iters, worst / iters);
  free(in);
  free(out);
  MPI_Finalize();
  return 0;
}
