// Guarded mode: before a collective runs, every member of its communicator
// sends the others what it is about to call (kind, blocking or not, sequence
// number, count, the datatype signature's size, op, root, call site) over a
// duplicate of the communicator that only the guard uses. Ranks that disagree
// are named with both call sites before MPI can hang or corrupt data, every
// rank writes its dump, and the job ends with MPI_Abort and collcheck's exit
// code. A rank that never comes to the exchange leaves the others in it; the
// watchdog's deadline covers that wait like any other blocking call.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

struct Wire {
  Fingerprint fp;
  char what[96];
  char site[128];
};

// The fields two fingerprints differ in, in the replay's words.
std::string differences(const Fingerprint& a, const Fingerprint& b) {
  std::string out;
  auto add = [&](const char* f) { out += (out.empty() ? "" : ", ") + std::string(f); };
  if (a.seq != b.seq) add("sequence");
  if (a.kind != b.kind) add("collective");
  if (a.nonblocking != b.nonblocking) add("blocking");
  // Predefined datatypes on both sides: count and type compared apart. A
  // derived one: only the signature's size (4 MPI_INT match 1 of a
  // contiguous type of 4 MPI_INT).
  const bool predefined = a.type_code >= 0 && b.type_code >= 0;
  if (a.kind == b.kind && (predefined ? a.count != b.count : a.type_bytes != b.type_bytes)) add("count");
  if (a.kind == b.kind && predefined && a.type_code != b.type_code) add("dtype");
  if (a.kind == b.kind && a.op != b.op) add("op");
  if (a.kind == b.kind && a.root != b.root) add("root");
  return out;
}

bool same(const Fingerprint& a, const Fingerprint& b) { return differences(a, b).empty(); }

}  // namespace

int32_t op_code(MPI_Op op) {
  const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_LAND, MPI_BAND, MPI_LOR,
                        MPI_BOR, MPI_LXOR, MPI_BXOR, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; ++i)
    if (ops[i] == op) return static_cast<int32_t>(i);
  return 100;  // a user-defined op
}

std::string op_name(MPI_Op op) {
  static const char* names[] = {"sum", "prod", "max", "min", "land", "band", "lor",
                                "bor", "lxor", "bxor", "maxloc", "minloc", "replace"};
  const int32_t k = op_code(op);
  return k < 13 ? names[k] : "user";
}

void guard(MPI_Comm c, const Fingerprint& fp, const Entry& e) {
  CommInfo& info = comm_info(c);
  if (!config().guarded || info.shadow == MPI_COMM_NULL) return;
  int n = 0, me = 0;
  PMPI_Comm_size(info.shadow, &n);
  PMPI_Comm_rank(info.shadow, &me);
  Wire mine{};
  mine.fp = fp;
  std::snprintf(mine.what, sizeof mine.what, "%s %lld %s", e.name.c_str() + 4, static_cast<long long>(e.count),
                e.dtype.c_str());
  std::snprintf(mine.site, sizeof mine.site, "%s", site_text(e.site).c_str());
  std::vector<Wire> all(static_cast<size_t>(n));
  blocking_enter(e.record_id);
  PMPI_Allgather(&mine, sizeof(Wire), MPI_BYTE, all.data(), sizeof(Wire), MPI_BYTE, info.shadow);
  blocking_leave();
  // The reference: what most ranks called (the lowest rank's on a tie).
  std::map<int, int> votes;  // first rank of a kind -> how many
  std::vector<int> first_like(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    int f = r;
    for (int q = 0; q < r; ++q)
      if (same(all[static_cast<size_t>(q)].fp, all[static_cast<size_t>(r)].fp)) {
        f = first_like[static_cast<size_t>(q)];
        break;
      }
    first_like[static_cast<size_t>(r)] = f;
    ++votes[f];
  }
  if (votes.size() == 1) return;
  int ref = votes.begin()->first;
  for (const auto& [f, v] : votes)
    if (v > votes[ref]) ref = f;
  const Wire& rw = all[static_cast<size_t>(ref)];
  if (me == 0) {
    auto ranks_of = [&](int f) {
      std::string s;
      for (int r = 0; r < n; ++r)
        if (first_like[static_cast<size_t>(r)] == f)
          s += (s.empty() ? "" : ",") + std::to_string(info.ranks[static_cast<size_t>(r)]);
      return s;
    };
    std::string text = "collcheck-mpi: guarded mode: the ranks of communicator " + info.name + " (" + info.desc +
                       ") disagree at collective #" + std::to_string(fp.seq) + ": rank(s) " + ranks_of(ref) +
                       " call " + rw.what + " at " + rw.site;
    for (const auto& [f, v] : votes) {
      if (f == ref) continue;
      const Wire& o = all[static_cast<size_t>(f)];
      text += "; rank(s) " + ranks_of(f) + " call " + o.what + " at " + o.site + " (differs in: " +
              differences(rw.fp, o.fp) + ")";
    }
    std::fprintf(stderr, "%s; the job is stopped before MPI runs it\n", text.c_str());
    std::fflush(stderr);
  }
  dump("guard: the ranks disagree at a collective");
  PMPI_Barrier(info.shadow);  // every member's dump is on disk before the abort
  mark_job_ending("guard");
  PMPI_Abort(MPI_COMM_WORLD, kExitFound);
}

}  // namespace collcheck_mpi
