"""CORRECT (mpi4py): a non-blocking all-reduce overlapped with work, a split
communicator, and a gather of Python objects.
collcheck-expect: clean
"""
from mpi4py import MPI
import array

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
half = comm.Split(rank % 2, rank)
a = array.array("d", [rank] * 16)
b = array.array("d", [0.0] * 16)
req = comm.Iallreduce(a, b, op=MPI.SUM)
work = sum(i * 0.5 for i in range(1000))
req.Wait()
half.Allreduce(a, b, op=MPI.MAX)
names = comm.gather(f"rank {rank}", root=0)
half.Free()
