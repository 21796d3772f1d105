"""BUG (mpi4py): the last rank skips an all-reduce of its gradients when its
batch is empty; the others wait in it.
collcheck-expect: missing_rank ranks=[n-1]
"""
from mpi4py import MPI
import array

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
grad = array.array("d", [1.0] * 8)
out = array.array("d", [0.0] * 8)
for step in range(3):
    if step == 2 and rank == size - 1:
        continue  # empty batch
    comm.Allreduce(grad, out, op=MPI.SUM)
