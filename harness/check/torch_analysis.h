// The diagnosis of PyTorch Flight Recorder dumps (harness/history/
// torch_trace.h, read into a job by torch_job.h), per process group and in
// collcheck's own kinds and words: collectives that disagree at one sequence
// number (order_mismatch: another collective; shape_mismatch: another dtype
// or size), ranks waiting on each other in a cycle across groups (deadlock,
// by the same cycle search as a replay's), and ranks missing from a
// collective that the group's other ranks entered and could not finish
// (missing_rank). When a fault stops a rank, it goes missing from several
// groups at once; the group whose stuck collective was entered first comes
// first: that is where the job stopped.
//
// Three outcomes, never a silent clean:
// - a diagnosis;
// - clean: every rank of the world left a dump, and every group's last call
//   ended on all of its members;
// - cannot decide: what is missing is said (a rank without a dump, an empty
//   buffer, a world size the dumps do not hold, a group whose members are not
//   known), with everything that can still be named.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/check/diagnosis.h"
#include "harness/history/torch_job.h"

namespace collcheck {

enum class TorchOutcome : uint8_t { Diagnosis, Clean, Undecided };

// A process group whose ranks are not all at the same collective.
struct TorchGroupLag {
  std::string name, desc;
  std::vector<int> ranks;             // the group's ranks
  std::map<int, int64_t> last;        // the last collective each rank with a dump issued
  std::vector<int> missing, joined;   // missing: at the lowest last collective
  int64_t stuck_seq = 0;              // the first collective the missing ranks never joined
  std::optional<TorchEntry> stuck;    // as the lowest joined rank recorded it (absent: out of every buffer)
  int64_t entered_ns = 0;             // when the first joined rank entered it
};

struct TorchAnalysis {
  TorchOutcome outcome = TorchOutcome::Undecided;
  // Mismatches first, then a wait-for cycle, then the missing ranks, earliest
  // stuck collective first.
  std::vector<Diagnosis> diagnoses;
  std::vector<TorchGroupLag> lags;      // the missing-rank rows, in the same order
  std::vector<std::string> undecided;   // what is missing for a verdict (the reason for "cannot decide")
  // Groups whose last call had not ended on ranks that all issued it: in
  // flight when dumped, or waiting behind a finding (a reason for "cannot
  // decide" only when there is no finding).
  std::vector<std::string> in_flight;
  std::vector<std::string> notes;       // what the dumps cannot tell, and how the groups were read
  int world = 0;
  bool world_known = false;
  // Members the dumps do not list, inferred by the wait-for cycle (group key
  // -> ranks): a rank in a call of a group whose every known member issued it
  // waits on a rank that never recorded a call of the group.
  std::map<std::string, std::vector<int>> inferred_members;
};

// collcheck's MPI interposer's dumps (torch_p2p.cc): point-to-point calls
// blocked on each other in a cycle (a send-send deadlock above the eager
// size: deadlock), non-blocking calls whose request no MPI_Wait/MPI_Test
// completed before MPI_Finalize or exit (unwaited_work), and a rank blocked
// in a point-to-point call that neither explains (a reason the dumps cannot
// be called clean). Adds to `out`; `named` gets the ranks it names.
void add_mpi_p2p_findings(const std::vector<TorchDump>& dumps, TorchAnalysis& out);
// Blocking collectives of two communicators that two ranks completed in
// opposite orders (MPI_Comm_free's order, say): a deadlock on an MPI that
// synchronizes in them (torch_order.cc). Ranks already named are left out.
void add_mpi_order_findings(const std::vector<TorchDump>& dumps, TorchAnalysis& out);

TorchAnalysis analyze_torch(const std::vector<TorchDump>& dumps, std::optional<int> world_size = std::nullopt);

std::string_view torch_outcome_name(TorchOutcome o);  // "diagnosis", "clean", "cannot decide"

}  // namespace collcheck
