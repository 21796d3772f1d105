// Point-to-point calls and unwaited requests in collcheck's MPI interposer's
// dumps (torch_analysis.h). PyTorch's dumps are left alone: Gloo records no
// send or recv, and NCCL's p2p calls are judged by their collectives.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "harness/check/torch_analysis.h"

namespace collcheck {

namespace {

// "mpi:isend", "mpi:iallreduce": no blocking MPI call's name begins with i.
bool nonblocking(const TorchEntry& e) { return e.op.starts_with("mpi:i"); }

std::string site(const TorchEntry& e) {
  const std::string s = torch_call_site(e);
  return s.empty() ? "" : " at " + s;
}

// The world rank a point-to-point entry waits on: "send 0->3" -> the group's
// rank 3; "recv 1<-0" -> rank 0; none for a wildcard receive.
std::optional<int> peer_of(const TorchDump& d, const TorchEntry& e) {
  const auto sp = e.op.find(' ');
  if (sp == std::string::npos) return std::nullopt;
  const std::string arrow = e.op.substr(sp + 1);
  size_t k = arrow.find("->");
  if (k == std::string::npos) k = arrow.find("<-");
  if (k == std::string::npos) return std::nullopt;
  const std::string peer = arrow.substr(k + 2);
  if (peer.empty() || !std::all_of(peer.begin(), peer.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      peer.size() > 7)
    return std::nullopt;
  const int q = std::stoi(peer);
  const auto g = d.groups.find(e.pg_name);
  if (g == d.groups.end() || q >= static_cast<int>(g->second.ranks.size())) return std::nullopt;
  return g->second.ranks[static_cast<size_t>(q)];
}

// The call a rank is blocked in: its first unended blocking call.
const TorchEntry* blocked_in(const TorchDump& d) {
  for (const auto& e : d.entries)
    if (!torch_entry_ended(e) && !nonblocking(e)) return &e;
  return nullptr;
}

}  // namespace

void add_mpi_p2p_findings(const std::vector<TorchDump>& dumps, TorchAnalysis& out) {
  std::map<int, const TorchDump*> by_rank;
  for (const auto& d : dumps)
    if (!d.collcheck_reason.empty()) by_rank[d.rank] = &d;
  if (by_rank.empty()) return;
  std::set<int> named;
  for (const auto& d : out.diagnoses) named.insert(d.ranks.begin(), d.ranks.end());

  // Wait-for edges of the ranks blocked in a blocking send or receive.
  std::map<int, std::pair<int, const TorchEntry*>> waits;
  for (const auto& [r, d] : by_rank) {
    const TorchEntry* e = blocked_in(*d);
    if (!e || !e->p2p) continue;
    if (const auto q = peer_of(*d, *e)) waits[r] = {*q, e};
  }
  std::set<int> in_cycle;
  for (const auto& [start, _] : waits) {
    std::vector<int> path{start};
    int at = start;
    while (waits.count(at) && path.size() <= waits.size()) {
      at = waits.at(at).first;
      const auto seen = std::find(path.begin(), path.end(), at);
      if (seen != path.end()) {
        std::vector<int> cyc(seen, path.end());
        if (std::any_of(cyc.begin(), cyc.end(), [&](int r) { return in_cycle.count(r); })) break;
        Diagnosis d;
        d.kind = DiagnosisKind::Deadlock;
        d.ranks = cyc;
        std::sort(d.ranks.begin(), d.ranks.end());
        std::string links;
        for (const int r : cyc) {
          const auto& [q, e] = waits.at(r);
          links += fmt::format("{}rank {} in {}{} waits on rank {}", links.empty() ? "" : "; ", r,
                               torch_entry_text(*e), site(*e), q);
          in_cycle.insert(r);
        }
        d.text = fmt::format("{} wait on each other in point-to-point calls: {} (a blocking send waits for its "
                             "receive above the eager size; no rank of the cycle can post it)",
                             rank_ranges_text(d.ranks), links);
        // A cycle is upstream of the ranks it leaves missing from collectives:
        // after any mismatch, before everything else.
        const auto at_pos = std::find_if(out.diagnoses.begin(), out.diagnoses.end(), [](const Diagnosis& x) {
          return x.kind != DiagnosisKind::ShapeMismatch && x.kind != DiagnosisKind::OrderMismatch;
        });
        out.diagnoses.insert(at_pos, std::move(d));
        break;
      }
      path.push_back(at);
    }
  }
  // Requests never completed on a rank that went on to MPI_Finalize or exit.
  for (const auto& [r, d] : by_rank) {
    if (d->collcheck_reason != "finalize" && !d->collcheck_reason.starts_with("exit")) continue;
    std::vector<const TorchEntry*> open;
    for (const auto& e : d->entries)
      if (!torch_entry_ended(e) && nonblocking(e)) open.push_back(&e);
    if (open.empty()) continue;
    Diagnosis dg;
    dg.kind = DiagnosisKind::UnwaitedWork;
    dg.ranks = {r};
    const TorchEntry& e = *open.front();
    dg.group = e.pg_name;
    if (!e.p2p) dg.seq = static_cast<uint64_t>(e.collective_seq);
    dg.text = fmt::format("rank {} reached {} with {} request(s) that no MPI_Wait or MPI_Test completed: the first, "
                          "{}{} (record {}), on communicator {}{}",
                          r, d->collcheck_reason == "finalize" ? "MPI_Finalize" : "exit", open.size(),
                          torch_entry_text(e), site(e), e.record_id, e.pg_name,
                          e.pg_desc.empty() ? "" : " (" + e.pg_desc + ")");
    out.diagnoses.push_back(std::move(dg));
    named.insert(r);
  }
  // Blocked in point-to-point with no finding that explains it: never clean.
  for (const auto& [r, w] : waits)
    if (!in_cycle.count(r) && !named.count(r))
      out.undecided.push_back(fmt::format("rank {} was blocked in {}{} (waiting on rank {}) when it was dumped",
                                          r, torch_entry_text(*w.second), site(*w.second), w.first));
}

}  // namespace collcheck
