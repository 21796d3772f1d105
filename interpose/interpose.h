// libcollcheck-mpi.so: a PMPI interposer that records a real MPI program's
// calls in collcheck's flight recorder, per rank, and (guarded mode) checks
// every collective's fingerprint across its communicator before MPI runs it.
//
// What a rank records: every collective of MPI-3 (blocking and non-blocking)
// with its communicator, count, datatype, op and root; every point-to-point
// call with the MPI_Wait/MPI_Test that completes its request; the call site
// (the return address, as object + offset: `collcheck run` turns it into file
// and line where the program has debug information).
//
// Where it goes: one file per rank, <dir>/mpi_trace_rank_<r>.json, in the
// JSON variant of PyTorch's Flight Recorder format (version 2.10, backend
// "mpi:"), so that `collcheck analyze DIR` reads it with the reader and the
// analysis it already has. It is written at MPI_Finalize, at exit, on
// SIGTERM/SIGINT/SIGABRT, on MPI_Abort, and by the watchdog on a hang.
//
// Configuration (environment; `collcheck run` sets it):
//   COLLCHECK_MPI_DIR       the dump directory (default: ./collcheck-mpi-<pid of rank 0's parent>)
//   COLLCHECK_MPI_MODE      guarded | unguarded (default unguarded)
//   COLLCHECK_MPI_DEADLINE  seconds a rank may sit in one blocking call (default 60)
//   COLLCHECK_MPI_ENTRIES   the ring's size per rank (default 4096)
//   COLLCHECK_MPI_RUN_ID    the run's id, written into every dump
//
// Nothing here uses the rest of collcheck: the library is loaded into the
// user's program, and only MPI and the C++ runtime go with it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace collcheck_mpi {

// The exit code the interposer ends a job with when it names a bug (as
// collcheck's: 1, a failure found).
inline constexpr int kExitFound = 1;

struct Config {
  std::string dir;
  bool guarded = false;
  double deadline_s = 60;
  size_t entries = 4096;
  std::string run_id;
};
const Config& config();

// The call site: the object the return address is in and its offset there.
struct Site {
  std::string object, symbol;
  uintptr_t offset = 0;
};
Site site_of(const void* return_address);
std::string site_text(const Site& s);

// ---- communicators (comms.cc) ----
struct CommInfo {
  std::string name;          // the same on every member: derived from its parent and how it was made
  std::string desc;          // "MPI_COMM_WORLD", "split of 0 (color 1)"
  std::vector<int> ranks;    // world ranks, in the communicator's order
  int64_t coll_seq = 0;      // collectives issued on it so far
  int64_t p2p_seq = 0;       // point-to-point calls issued on it so far
  int64_t children = 0;      // communicators made from it so far
  MPI_Comm shadow = MPI_COMM_NULL;  // guarded mode: a duplicate for the fingerprint exchange
};
// The communicator's record, made on first sight (a communicator the
// interposer did not see created gets a name from its members).
CommInfo& comm_info(MPI_Comm c);
void comms_init();
// Every communicator seen: name, desc, world ranks (for the dump's pg_config).
struct CommRow {
  std::string name, desc;
  std::vector<int> ranks;
};
std::vector<CommRow> comm_table();
bool is_inter(MPI_Comm c);
int world_rank();
int world_size();

// ---- the recorder (recorder.cc) ----
struct Entry {
  uint64_t record_id = 0;
  std::string group;           // CommInfo::name
  int64_t coll_seq = 0, p2p_seq = 0;
  bool p2p = false;
  std::string name;            // "mpi:allreduce op=sum", "mpi:send 0->3"
  int64_t count = 0;
  std::string dtype;           // PyTorch's name where one fits ("Float", "Int"), else "Byte" (count in bytes)
  std::string state = "started";  // started, completed
  int64_t created_ns = 0, completed_ns = 0;
  Site site;
};
// Records a call as started; returns its id.
uint64_t record(Entry e);
// MPI_Comm_free of a communicator the program made: recorded and guarded as
// a collective of it ("mpi:comm_free"); the caller frees, then completes it.
uint64_t begin_comm_free(MPI_Comm c, const void* ra);
void complete(uint64_t id);
// A wildcard receive's record ("<-any") learns the source it matched.
void matched_source(uint64_t id, int source);
// Writes this rank's dump (atomically); `why` goes into it. Safe to call from
// the watchdog thread and more than once.
void dump(const char* why);
int64_t now_ns();
// The dtype's name and count as the dump writes them.
std::pair<std::string, int64_t> dtype_of(MPI_Datatype t, int count);
// A derived datatype as its one predefined element type and the count of
// them (MPI_DATATYPE_NULL and the bytes when it mixes types): 1 of a
// contiguous type of 4 MPI_INT is 4 MPI_INT, as MPI's type matching says.
std::pair<MPI_Datatype, int64_t> elements_of(MPI_Datatype t, int count);
// A predefined datatype's code (the same in every process of the job); -1 for a derived one.
int32_t type_code(MPI_Datatype t);

// ---- requests (p2p.cc): a non-blocking call's record, completed by the
// MPI_Wait/MPI_Test family when its request completes ----
void track_request(MPI_Request q, uint64_t id);

// ---- the watchdog (watchdog.cc) ----
// Leaves DIR/ended naming why this rank is ending the job (guard, MPI_Abort,
// an MPI error): `collcheck run` stops a launcher that does not end the job
// by itself soon after (Open MPI 4.1's mpirun can hang when ranks die while
// others are in MPI_Finalize).
void mark_job_ending(const char* why);
void watchdog_start();
void watchdog_stop();
// A blocking call begins / ends (nesting: the outermost counts).
void blocking_enter(uint64_t id);
void blocking_leave();
// dump() tells the watchdog which thread writes a dump: a SIGTERM, SIGINT or
// SIGABRT that lands on that thread lets it finish, and the rank dies of the
// signal at dump_ends (waiting, in the handler, for a dump that the
// interrupted thread holds the lock of would lose it).
void dump_begins();
void dump_ends();

// ---- the guard (guard.cc) ----
enum class Kind : int32_t {
  Barrier = 1, Bcast, Reduce, Allreduce, Gather, Gatherv, Scatter, Scatterv, Allgather, Allgatherv, Alltoall,
  Alltoallv, ReduceScatter, ReduceScatterBlock, Scan, Exscan, Alltoallw,
  CommFree,  // MPI_Comm_free: collective, so every member must free its communicators in one order
  NeighborAllgather, NeighborAllgatherv, NeighborAlltoall, NeighborAlltoallv, NeighborAlltoallw,
};
struct Fingerprint {
  int32_t kind = 0;
  int32_t nonblocking = 0;
  int64_t seq = 0;
  int64_t count = -1;       // -1: not compared (v-variants)
  int64_t type_bytes = -1;  // size of the datatype signature: count × type size
  int32_t type_code = -1;   // a predefined datatype's code; -1: derived (only its size is compared)
  int32_t op = -1;          // -1: not a reduction
  int32_t root = -1;        // -1: rootless
  uint64_t site_hash = 0;
};
// Guarded mode: exchanges the fingerprint over the communicator's shadow and
// ends the job (MPI_Abort, kExitFound) on a mismatch, naming both sides.
void guard(MPI_Comm c, const Fingerprint& fp, const Entry& e);
std::string op_name(MPI_Op op);
int32_t op_code(MPI_Op op);

}  // namespace collcheck_mpi
