// Every collective of MPI-3 on intra-communicators, blocking and non-blocking:
// recorded (kind, count, datatype, op, root, call site), checked by the guard
// in guarded mode, and run under the watchdog's deadline when it blocks.
#include <string>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

struct Spec {
  MPI_Comm comm;
  Kind kind;
  const char* name;  // MPI's, lower case, without MPI_ ("allreduce")
  int count;         // the count every rank must agree on (-1: a v-variant's, not compared)
  int dump_count;    // what the dump shows (this rank's elements)
  MPI_Datatype type;
  MPI_Op op = MPI_OP_NULL;
  int root = -1;
};

// Records the call, runs the guard, and returns the record's id.
uint64_t begin(const Spec& s, bool nonblocking, const void* ra) {
  CommInfo& info = comm_info(s.comm);
  const int64_t seq = ++info.coll_seq;
  Entry e;
  e.group = info.name;
  e.coll_seq = seq;
  e.name = std::string("mpi:") + (nonblocking ? "i" : "") + s.name;
  if (s.op != MPI_OP_NULL) e.name += " op=" + op_name(s.op);
  if (s.root >= 0) e.name += " root=" + std::to_string(s.root);
  const bool no_data = s.kind == Kind::Barrier || s.kind == Kind::CommFree;
  const auto [dtype, count] = no_data ? std::pair<std::string, int64_t>{"Byte", 0}
                                                       : dtype_of(s.type, s.dump_count);
  e.dtype = dtype;
  e.count = count;
  e.site = site_of(ra);
  Fingerprint fp;
  fp.kind = static_cast<int32_t>(s.kind);
  fp.nonblocking = nonblocking ? 1 : 0;
  fp.seq = seq;
  if (s.count >= 0 && !no_data) {
    int size = 0;
    if (s.type != MPI_DATATYPE_NULL) PMPI_Type_size(s.type, &size);
    const auto [base, elements] = elements_of(s.type, s.count);
    fp.count = elements;
    fp.type_bytes = int64_t{s.count} * size;
    fp.type_code = type_code(base);
  }
  fp.op = s.op == MPI_OP_NULL ? -1 : op_code(s.op);
  fp.root = s.root;
  e.record_id = record(e);
  if (!is_inter(s.comm)) guard(s.comm, fp, e);
  return e.record_id;
}

template <typename F>
int blocking(const Spec& s, const void* ra, F call) {
  const uint64_t id = begin(s, false, ra);
  blocking_enter(id);
  const int rc = call();
  blocking_leave();
  complete(id);
  return rc;
}

template <typename F>
int nonblocking(const Spec& s, MPI_Request* req, const void* ra, F call) {
  const uint64_t id = begin(s, true, ra);
  const int rc = call();
  if (rc == MPI_SUCCESS && req) track_request(*req, id);
  return rc;
}

int rank_in(MPI_Comm c) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}

// A process topology's out-degree: how many counts a neighborhood v/w call's arrays hold.
int out_degree(MPI_Comm c) {
  int kind = MPI_UNDEFINED, n = 0, in = 0, weighted = 0;
  PMPI_Topo_test(c, &kind);
  if (kind == MPI_CART) {
    PMPI_Cartdim_get(c, &n);
    return 2 * n;
  }
  if (kind == MPI_GRAPH) {
    PMPI_Graph_neighbors_count(c, rank_in(c), &n);
    return n;
  }
  if (kind == MPI_DIST_GRAPH) {
    PMPI_Dist_graph_neighbors_count(c, &in, &n, &weighted);
    return n;
  }
  return 0;
}

int sum_of(const int* counts, int n) {
  int s = 0;
  for (int i = 0; counts && i < n; ++i) s += counts[i];
  return s;
}

}  // namespace

uint64_t begin_comm_free(MPI_Comm c, const void* ra) {
  return begin({c, Kind::CommFree, "comm_free", 0, 0, MPI_BYTE}, false, ra);
}

}  // namespace collcheck_mpi

using namespace collcheck_mpi;

#define RA __builtin_return_address(0)

extern "C" {

int MPI_Barrier(MPI_Comm c) {
  return blocking({c, Kind::Barrier, "barrier", 0, 0, MPI_BYTE}, RA, [&] { return PMPI_Barrier(c); });
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Barrier, "barrier", 0, 0, MPI_BYTE}, q, RA, [&] { return PMPI_Ibarrier(c, q); });
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  return blocking({c, Kind::Bcast, "bcast", n, n, t, MPI_OP_NULL, root}, RA, [&] { return PMPI_Bcast(b, n, t, root, c); });
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Bcast, "bcast", n, n, t, MPI_OP_NULL, root}, q, RA,
                     [&] { return PMPI_Ibcast(b, n, t, root, c, q); });
}
int MPI_Reduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  return blocking({c, Kind::Reduce, "reduce", n, n, t, op, root}, RA, [&] { return PMPI_Reduce(s, r, n, t, op, root, c); });
}
int MPI_Ireduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Reduce, "reduce", n, n, t, op, root}, q, RA,
                     [&] { return PMPI_Ireduce(s, r, n, t, op, root, c, q); });
}
int MPI_Allreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  return blocking({c, Kind::Allreduce, "allreduce", n, n, t, op}, RA, [&] { return PMPI_Allreduce(s, r, n, t, op, c); });
}
int MPI_Iallreduce(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Allreduce, "allreduce", n, n, t, op}, q, RA,
                     [&] { return PMPI_Iallreduce(s, r, n, t, op, c, q); });
}
int MPI_Gather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  return blocking({c, Kind::Gather, "gather", sn, sn, st, MPI_OP_NULL, root}, RA,
                  [&] { return PMPI_Gather(s, sn, st, r, rn, rt, root, c); });
}
int MPI_Igather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                MPI_Request* q) {
  return nonblocking({c, Kind::Gather, "gather", sn, sn, st, MPI_OP_NULL, root}, q, RA,
                     [&] { return PMPI_Igather(s, sn, st, r, rn, rt, root, c, q); });
}
int MPI_Gatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[], MPI_Datatype rt,
                int root, MPI_Comm c) {
  return blocking({c, Kind::Gatherv, "gatherv", -1, sn, st, MPI_OP_NULL, root}, RA,
                  [&] { return PMPI_Gatherv(s, sn, st, r, rn, d, rt, root, c); });
}
int MPI_Scatter(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c) {
  return blocking({c, Kind::Scatter, "scatter", rn, rn, rt, MPI_OP_NULL, root}, RA,
                  [&] { return PMPI_Scatter(s, sn, st, r, rn, rt, root, c); });
}
int MPI_Iscatter(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root, MPI_Comm c,
                 MPI_Request* q) {
  return nonblocking({c, Kind::Scatter, "scatter", rn, rn, rt, MPI_OP_NULL, root}, q, RA,
                     [&] { return PMPI_Iscatter(s, sn, st, r, rn, rt, root, c, q); });
}
int MPI_Scatterv(const void* s, const int sn[], const int d[], MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                 int root, MPI_Comm c) {
  return blocking({c, Kind::Scatterv, "scatterv", -1, rn, rt, MPI_OP_NULL, root}, RA,
                  [&] { return PMPI_Scatterv(s, sn, d, st, r, rn, rt, root, c); });
}
int MPI_Allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::Allgather, "allgather", sn, sn, st}, RA,
                  [&] { return PMPI_Allgather(s, sn, st, r, rn, rt, c); });
}
int MPI_Iallgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                   MPI_Request* q) {
  return nonblocking({c, Kind::Allgather, "allgather", sn, sn, st}, q, RA,
                     [&] { return PMPI_Iallgather(s, sn, st, r, rn, rt, c, q); });
}
int MPI_Allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[], MPI_Datatype rt,
                   MPI_Comm c) {
  return blocking({c, Kind::Allgatherv, "allgatherv", -1, sn, st}, RA,
                  [&] { return PMPI_Allgatherv(s, sn, st, r, rn, d, rt, c); });
}
int MPI_Alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::Alltoall, "alltoall", sn, sn, st}, RA,
                  [&] { return PMPI_Alltoall(s, sn, st, r, rn, rt, c); });
}
int MPI_Ialltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                  MPI_Request* q) {
  return nonblocking({c, Kind::Alltoall, "alltoall", sn, sn, st}, q, RA,
                     [&] { return PMPI_Ialltoall(s, sn, st, r, rn, rt, c, q); });
}
int MPI_Alltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r, const int rn[],
                  const int rd[], MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::Alltoallv, "alltoallv", -1, sn ? sn[rank_in(c)] : 0, st}, RA,
                  [&] { return PMPI_Alltoallv(s, sn, sd, st, r, rn, rd, rt, c); });
}
int MPI_Reduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  return blocking({c, Kind::ReduceScatterBlock, "reduce_scatter_block", n, n, t, op}, RA,
                  [&] { return PMPI_Reduce_scatter_block(s, r, n, t, op, c); });
}
int MPI_Ireduce_scatter_block(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::ReduceScatterBlock, "reduce_scatter_block", n, n, t, op}, q, RA,
                     [&] { return PMPI_Ireduce_scatter_block(s, r, n, t, op, c, q); });
}
int MPI_Reduce_scatter(const void* s, void* r, const int n[], MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  return blocking({c, Kind::ReduceScatter, "reduce_scatter", -1, n ? n[rank_in(c)] : 0, t, op}, RA,
                  [&] { return PMPI_Reduce_scatter(s, r, n, t, op, c); });
}
int MPI_Scan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  return blocking({c, Kind::Scan, "scan", n, n, t, op}, RA, [&] { return PMPI_Scan(s, r, n, t, op, c); });
}
int MPI_Iscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Scan, "scan", n, n, t, op}, q, RA, [&] { return PMPI_Iscan(s, r, n, t, op, c, q); });
}
int MPI_Exscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  return blocking({c, Kind::Exscan, "exscan", n, n, t, op}, RA, [&] { return PMPI_Exscan(s, r, n, t, op, c); });
}
int MPI_Iexscan(const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Exscan, "exscan", n, n, t, op}, q, RA,
                     [&] { return PMPI_Iexscan(s, r, n, t, op, c, q); });
}
int MPI_Igatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[], MPI_Datatype rt,
                 int root, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Gatherv, "gatherv", -1, sn, st, MPI_OP_NULL, root}, q, RA,
                     [&] { return PMPI_Igatherv(s, sn, st, r, rn, d, rt, root, c, q); });
}
int MPI_Iscatterv(const void* s, const int sn[], const int d[], MPI_Datatype st, void* r, int rn, MPI_Datatype rt,
                  int root, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Scatterv, "scatterv", -1, rn, rt, MPI_OP_NULL, root}, q, RA,
                     [&] { return PMPI_Iscatterv(s, sn, d, st, r, rn, rt, root, c, q); });
}
int MPI_Iallgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[], MPI_Datatype rt,
                    MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Allgatherv, "allgatherv", -1, sn, st}, q, RA,
                     [&] { return PMPI_Iallgatherv(s, sn, st, r, rn, d, rt, c, q); });
}
int MPI_Ialltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r, const int rn[],
                   const int rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::Alltoallv, "alltoallv", -1, sn ? sn[rank_in(c)] : 0, st}, q, RA,
                     [&] { return PMPI_Ialltoallv(s, sn, sd, st, r, rn, rd, rt, c, q); });
}
int MPI_Alltoallw(const void* s, const int sn[], const int sd[], const MPI_Datatype st[], void* r, const int rn[],
                  const int rd[], const MPI_Datatype rt[], MPI_Comm c) {
  const int me = rank_in(c);
  return blocking({c, Kind::Alltoallw, "alltoallw", -1, sn ? sn[me] : 0, st ? st[me] : MPI_BYTE}, RA,
                  [&] { return PMPI_Alltoallw(s, sn, sd, st, r, rn, rd, rt, c); });
}
int MPI_Ialltoallw(const void* s, const int sn[], const int sd[], const MPI_Datatype st[], void* r, const int rn[],
                   const int rd[], const MPI_Datatype rt[], MPI_Comm c, MPI_Request* q) {
  const int me = rank_in(c);
  return nonblocking({c, Kind::Alltoallw, "alltoallw", -1, sn ? sn[me] : 0, st ? st[me] : MPI_BYTE}, q, RA,
                     [&] { return PMPI_Ialltoallw(s, sn, sd, st, r, rn, rd, rt, c, q); });
}
int MPI_Ireduce_scatter(const void* s, void* r, const int n[], MPI_Datatype t, MPI_Op op, MPI_Comm c,
                        MPI_Request* q) {
  return nonblocking({c, Kind::ReduceScatter, "reduce_scatter", -1, n ? n[rank_in(c)] : 0, t, op}, q, RA,
                     [&] { return PMPI_Ireduce_scatter(s, r, n, t, op, c, q); });
}


// Neighborhood collectives (MPI-3, 7.6) on a process topology. What each rank
// sends may differ legitimately from its neighbours' (only sender-receiver
// pairs must match), so the guard compares the kind and blocking form only.
int MPI_Neighbor_allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::NeighborAllgather, "neighbor_allgather", -1, sn, st}, RA,
                  [&] { return PMPI_Neighbor_allgather(s, sn, st, r, rn, rt, c); });
}
int MPI_Ineighbor_allgather(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                            MPI_Request* q) {
  return nonblocking({c, Kind::NeighborAllgather, "neighbor_allgather", -1, sn, st}, q, RA,
                     [&] { return PMPI_Ineighbor_allgather(s, sn, st, r, rn, rt, c, q); });
}
int MPI_Neighbor_allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[],
                            MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::NeighborAllgatherv, "neighbor_allgatherv", -1, sn, st}, RA,
                  [&] { return PMPI_Neighbor_allgatherv(s, sn, st, r, rn, d, rt, c); });
}
int MPI_Ineighbor_allgatherv(const void* s, int sn, MPI_Datatype st, void* r, const int rn[], const int d[],
                             MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::NeighborAllgatherv, "neighbor_allgatherv", -1, sn, st}, q, RA,
                     [&] { return PMPI_Ineighbor_allgatherv(s, sn, st, r, rn, d, rt, c, q); });
}
int MPI_Neighbor_alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::NeighborAlltoall, "neighbor_alltoall", -1, sn * out_degree(c), st}, RA,
                  [&] { return PMPI_Neighbor_alltoall(s, sn, st, r, rn, rt, c); });
}
int MPI_Ineighbor_alltoall(const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c,
                           MPI_Request* q) {
  return nonblocking({c, Kind::NeighborAlltoall, "neighbor_alltoall", -1, sn * out_degree(c), st}, q, RA,
                     [&] { return PMPI_Ineighbor_alltoall(s, sn, st, r, rn, rt, c, q); });
}
int MPI_Neighbor_alltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r, const int rn[],
                           const int rd[], MPI_Datatype rt, MPI_Comm c) {
  return blocking({c, Kind::NeighborAlltoallv, "neighbor_alltoallv", -1, sum_of(sn, out_degree(c)), st}, RA,
                  [&] { return PMPI_Neighbor_alltoallv(s, sn, sd, st, r, rn, rd, rt, c); });
}
int MPI_Ineighbor_alltoallv(const void* s, const int sn[], const int sd[], MPI_Datatype st, void* r,
                            const int rn[], const int rd[], MPI_Datatype rt, MPI_Comm c, MPI_Request* q) {
  return nonblocking({c, Kind::NeighborAlltoallv, "neighbor_alltoallv", -1, sum_of(sn, out_degree(c)), st}, q, RA,
                     [&] { return PMPI_Ineighbor_alltoallv(s, sn, sd, st, r, rn, rd, rt, c, q); });
}
int MPI_Neighbor_alltoallw(const void* s, const int sn[], const MPI_Aint sd[], const MPI_Datatype st[], void* r,
                           const int rn[], const MPI_Aint rd[], const MPI_Datatype rt[], MPI_Comm c) {
  const int k = out_degree(c);
  return blocking({c, Kind::NeighborAlltoallw, "neighbor_alltoallw", -1, k > 0 && sn ? sn[0] : 0,
                   k > 0 && st ? st[0] : MPI_BYTE},
                  RA, [&] { return PMPI_Neighbor_alltoallw(s, sn, sd, st, r, rn, rd, rt, c); });
}
int MPI_Ineighbor_alltoallw(const void* s, const int sn[], const MPI_Aint sd[], const MPI_Datatype st[], void* r,
                            const int rn[], const MPI_Aint rd[], const MPI_Datatype rt[], MPI_Comm c,
                            MPI_Request* q) {
  const int k = out_degree(c);
  return nonblocking({c, Kind::NeighborAlltoallw, "neighbor_alltoallw", -1, k > 0 && sn ? sn[0] : 0,
                      k > 0 && st ? st[0] : MPI_BYTE},
                     q, RA, [&] { return PMPI_Ineighbor_alltoallw(s, sn, sd, st, r, rn, rd, rt, c, q); });
}

}  // extern "C"
