// Communicators as every member names them. A communicator made from a parent
// is named <parent>.<k>:<first member>, where k counts the communicators the
// parent's members made from it (every member takes part in each creation, so
// k agrees) and the first member's world rank tells apart the siblings of one
// split. MPI_COMM_WORLD is "0". A communicator the interposer did not see made
// (MPI_Cart_create, an inter-communicator's merge) is named by its members.
#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

std::recursive_mutex mu;
std::map<MPI_Comm, CommInfo> live;
std::map<std::string, CommRow> seen;  // every communicator ever named, for the dump
int w_rank = -1, w_size = 0;

std::vector<int> world_ranks_of(MPI_Comm c) {
  MPI_Group g, wg;
  int n = 0;
  PMPI_Comm_group(c, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &wg);
  PMPI_Group_size(g, &n);
  std::vector<int> local(static_cast<size_t>(n)), world(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) local[static_cast<size_t>(i)] = i;
  PMPI_Group_translate_ranks(g, n, local.data(), wg, world.data());
  PMPI_Group_free(&g);
  PMPI_Group_free(&wg);
  return world;
}

CommInfo& add(MPI_Comm c, std::string name, std::string desc, bool shadow) {
  std::lock_guard lock(mu);
  CommInfo info;
  info.name = std::move(name);
  info.desc = std::move(desc);
  info.ranks = world_ranks_of(c);
  if (shadow && config().guarded && !is_inter(c)) PMPI_Comm_dup(c, &info.shadow);
  seen[info.name] = CommRow{info.name, info.desc, info.ranks};
  return live[c] = std::move(info);
}

// A new communicator `out` made from `parent`; `how` says how, for the desc.
void made(MPI_Comm parent, MPI_Comm* out, const std::string& how) {
  std::lock_guard lock(mu);
  CommInfo& p = comm_info(parent);
  const int64_t k = p.children++;
  if (!out || *out == MPI_COMM_NULL) return;
  const std::vector<int> ranks = world_ranks_of(*out);
  const std::string name = p.name + "." + std::to_string(k) + ":" + std::to_string(ranks.empty() ? -1 : ranks[0]);
  add(*out, name, how + " of " + p.name, true);
}

}  // namespace

bool is_inter(MPI_Comm c) {
  int flag = 0;
  PMPI_Comm_test_inter(c, &flag);
  return flag != 0;
}

int world_rank() { return w_rank; }
int world_size() { return w_size; }

namespace {
// MPI_ERRORS_ARE_FATAL, with the rank's dump written first: an error MPI
// raises (a truncated message, a bad argument) ends the job inside MPI,
// where no wrapper of ours sees it. A program that sets its own handler
// keeps it.
void fatal_with_dump(MPI_Comm* comm, int* code, ...) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  PMPI_Error_string(*code, text, &len);
  const std::string why = "MPI error: " + std::string(text, static_cast<size_t>(std::max(0, len)));
  std::fprintf(stderr, "collcheck-mpi: rank %d: %s; the rank's dump is written, then the job ends\n", w_rank, why.c_str());
  dump(why.c_str());
  mark_job_ending("MPI error");
  PMPI_Abort(comm ? *comm : MPI_COMM_WORLD, *code);
}
}  // namespace

void comms_init() {
  PMPI_Comm_rank(MPI_COMM_WORLD, &w_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &w_size);
  add(MPI_COMM_WORLD, "0", "MPI_COMM_WORLD", true);
  MPI_Errhandler h;
  if (PMPI_Comm_create_errhandler(fatal_with_dump, &h) == MPI_SUCCESS) PMPI_Comm_set_errhandler(MPI_COMM_WORLD, h);
}

CommInfo& comm_info(MPI_Comm c) {
  std::lock_guard lock(mu);
  if (auto it = live.find(c); it != live.end()) return it->second;
  if (c == MPI_COMM_SELF) return add(c, "self:" + std::to_string(w_rank), "MPI_COMM_SELF", false);
  std::string name = "x";
  for (int r : world_ranks_of(c)) name += ":" + std::to_string(r);
  return add(c, name, "a communicator made outside the calls collcheck follows", false);
}

std::vector<CommRow> comm_table() {
  std::lock_guard lock(mu);
  std::vector<CommRow> out;
  for (const auto& [name, row] : seen) out.push_back(row);
  return out;
}

}  // namespace collcheck_mpi

using namespace collcheck_mpi;

extern "C" {

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup(comm, newcomm);
  if (rc == MPI_SUCCESS) made(comm, newcomm, "dup");
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split(comm, color, key, newcomm);
  if (rc == MPI_SUCCESS) made(comm, newcomm, color == MPI_UNDEFINED ? "split" : "split (color " + std::to_string(color) + ")");
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
  if (rc == MPI_SUCCESS) made(comm, newcomm, "split_type");
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create(comm, group, newcomm);
  if (rc == MPI_SUCCESS) made(comm, newcomm, "create");
  return rc;
}

// Process topologies: collective over the parent, so the count k agrees.
// (MPI_Comm_create_group involves only the group, and MPI_Comm_idup's
// communicator is not usable before its request completes: both are named
// by their members.)
int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm* out) {
  const int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, out);
  if (rc == MPI_SUCCESS) made(comm, out, "cart_create (" + std::to_string(ndims) + "-D)");
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* out) {
  const int rc = PMPI_Cart_sub(comm, remain_dims, out);
  if (rc == MPI_SUCCESS) made(comm, out, "cart_sub");
  return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder, MPI_Comm* out) {
  const int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, out);
  if (rc == MPI_SUCCESS) made(comm, out, "graph_create");
  return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[], const int dest[],
                          const int weights[], MPI_Info info, int reorder, MPI_Comm* out) {
  const int rc = PMPI_Dist_graph_create(comm, n, sources, degrees, dest, weights, info, reorder, out);
  if (rc == MPI_SUCCESS) made(comm, out, "dist_graph_create");
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int dests[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* out) {
  const int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree, dests,
                                                 destweights, info, reorder, out);
  if (rc == MPI_SUCCESS) made(comm, out, "dist_graph_create_adjacent");
  return rc;
}

int MPI_Comm_free(MPI_Comm* comm) {
  // One the program made (not an inter-communicator): a collective call of it.
  bool ours = false;
  {
    std::lock_guard lock(mu);
    ours = comm && *comm != MPI_COMM_NULL && live.count(*comm) && !is_inter(*comm);
  }
  const uint64_t id = ours ? begin_comm_free(*comm, __builtin_return_address(0)) : 0;
  if (ours) blocking_enter(id);
  {
    std::lock_guard lock(mu);
    if (comm) {
      auto it = live.find(*comm);
      if (it != live.end()) {
        if (it->second.shadow != MPI_COMM_NULL) PMPI_Comm_free(&it->second.shadow);
        live.erase(it);
      }
    }
  }
  const int rc = PMPI_Comm_free(comm);
  if (ours) {
    blocking_leave();
    complete(id);
  }
  return rc;
}

}  // extern "C"
