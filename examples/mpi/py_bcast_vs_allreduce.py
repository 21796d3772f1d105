"""BUG (mpi4py): rank 0 broadcasts where the others all-reduce.
collcheck-expect: order_mismatch ranks=[0]
"""
from mpi4py import MPI
import array

comm = MPI.COMM_WORLD
buf = array.array("i", [1, 2, 3, 4])
out = array.array("i", [0] * 4)
if comm.Get_rank() == 0:
    comm.Bcast(buf, root=0)
else:
    comm.Allreduce(buf, out, op=MPI.SUM)
