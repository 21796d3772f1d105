// The point-to-point calls of collcheck's MPI interposer's dumps, written into
// an emitted scenario (torch_scenario.h). MPI matches the n-th send from a to
// b with the n-th receive at b from a (one tag; the dumps do not keep tags),
// and so does a scenario: both sides get the tag "p2p_<a>_<b>#<n>".
//
// How each record is written:
// - a blocking send that ended: async, waited at the end (it left eagerly or
//   met its receive; either way it did not hold the rank);
// - a blocking send or receive that did not end: a sync call (the rank sat in it);
// - a blocking receive that ended: a sync call;
// - MPI_Sendrecv ("mpi:sendrecv"): its send async, its receive sync, then a
//   wait on the send, as the call posts both at once;
// - a non-blocking one: async, with a `wait:` step where the rank's next
//   record was made after the request completed (MPI_Wait/Test), never waited
//   when the rank reached MPI_Finalize or exit with it open, else at the end.
// A receive posted for more elements than the matching send moved is written
// with the send's count (MPI allows it); fewer stays as recorded (truncation).
// A wildcard receive is written as a receive from the source it matched
// (the interposer records it at completion). A group with a wildcard receive
// that never completed, or whose buffer lost its first records, keeps its
// point-to-point calls out, and a note says so.
#include "harness/history/torch_scenario_p2p.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace collcheck {

namespace {

struct Arrow {
  std::string verb;  // send, isend, recv, irecv, sendrecv, ...
  bool send = false;
  int me = -1, peer = -1;  // ranks of the communicator
};

std::optional<Arrow> arrow_of(const std::string& op) {
  if (!op.starts_with("mpi:")) return std::nullopt;
  const auto sp = op.find(' ');
  if (sp == std::string::npos) return std::nullopt;
  Arrow a;
  a.verb = op.substr(4, sp - 4);
  if (a.verb.ends_with("AnySource")) a.verb.resize(a.verb.size() - 9);  // resolved: "recvAnySource 1<-0"
  const std::string rest = op.substr(sp + 1);
  size_t k = rest.find("->");
  a.send = k != std::string::npos;
  if (!a.send) k = rest.find("<-");
  if (k == std::string::npos) return std::nullopt;
  auto num = [](std::string_view t, int& v) {
    return !t.empty() && std::from_chars(t.data(), t.data() + t.size(), v).ec == std::errc() && v >= 0;
  };
  if (!num(std::string_view(rest).substr(0, k), a.me) || !num(std::string_view(rest).substr(k + 2), a.peer))
    return std::nullopt;
  return a;
}

}  // namespace

MpiP2pWriter::MpiP2pWriter(const std::vector<TorchDump>& dumps) {
  std::map<std::string, std::string> why_not;
  for (const auto& d : dumps) {
    if (d.collcheck_reason.empty()) continue;
    std::map<std::string, int64_t> first;
    for (const auto& e : d.entries) {
      if (!e.p2p) continue;
      const std::string k = torch_group_key(d, e);
      if (!first.count(k)) first[k] = e.p2p_seq;
      const auto g = d.groups.find(e.pg_name);
      if (g == d.groups.end()) {
        why_not[k] = "the dumps do not list its members";
      } else if (const auto a = arrow_of(e.op); !a || a->peer >= static_cast<int>(g->second.ranks.size())) {
        why_not[k] = e.op.find("AnySource") != std::string::npos
                         ? "a wildcard receive (MPI_ANY_SOURCE) that never completed: no send is known to match it"
                         : "a record whose peer is not a member: " + e.op;
      } else {
        members_[k] = g->second.ranks;
      }
    }
    for (const auto& [k, seq] : first)
      if (seq != 1) why_not[k] = fmt::format("rank {}'s buffer lost its first records (its oldest is #{})", d.rank, seq);
  }
  for (const auto& [k, why] : why_not) {
    members_.erase(k);
    notes.push_back(fmt::format("the point-to-point calls of process group {} are left out: {}", k, why));
  }
  // The sends each receive pairs with: the n-th from a to b.
  std::map<std::tuple<std::string, int, int>, uint64_t> sends;  // (pg, from, to) -> sends so far
  for (const auto& d : dumps)
    for (const auto& e : d.entries) {
      const std::string k = torch_group_key(d, e);
      if (!e.p2p || !members_.count(k)) continue;
      const Arrow a = *arrow_of(e.op);
      if (!a.send) continue;
      const uint64_t n = ++sends[{k, a.me, a.peer}];
      sent_[{k, a.me, a.peer, n}] =
          e.input_sizes.empty() || e.input_sizes.front().empty() ? 0 : static_cast<uint64_t>(e.input_sizes.front()[0]);
    }
}

void MpiP2pWriter::waits_before(int64_t created_ns, Program& prog) {
  auto& mine = pending_[current_rank_];
  for (auto it = mine.begin(); it != mine.end();) {
    if (it->first < created_ns) {
      Step w;
      w.kind = Step::Wait;
      w.handle = it->second;
      prog.push_back(std::move(w));
      it = mine.erase(it);
    } else {
      ++it;
    }
  }
}

void MpiP2pWriter::start_rank(int rank) { current_rank_ = rank; }

size_t MpiP2pWriter::place(const TorchDump& d, const TorchEntry& e, const std::string& group,
                                        bool finished, Program& prog, const std::function<void(CallStep&)>& fill) {
  const std::string k = torch_group_key(d, e);
  const Arrow a = *arrow_of(e.op);
  const std::vector<int>& m = members_.at(k);
  const int from = a.send ? a.me : a.peer, to = a.send ? a.peer : a.me;
  const uint64_t n = ++counted_[{k, from, to, a.send}];
  Step step;
  step.kind = Step::Call;
  CallStep& c = step.call;
  fill(c);  // dtype, count, shape as the collectives get them
  c.coll = a.send ? Collective::Send : Collective::Recv;
  c.group = group;
  c.peer = m.at(static_cast<size_t>(a.peer));
  c.tag = fmt::format("p2p_{}_{}#{}", from, to, n);
  const uint64_t posted =
      e.input_sizes.empty() || e.input_sizes.front().empty() ? 0 : static_cast<uint64_t>(e.input_sizes.front()[0]);
  if (const auto it = sent_.find({k, a.peer, a.me, n}); !a.send && it != sent_.end() && it->second < posted) {
    c.count = c.count / posted * it->second;  // the count may be in bytes (a dtype written as uint8)
    c.shape.clear();
  }
  const bool ended = torch_entry_ended(e);
  const bool nonblocking = a.verb.starts_with("i");
  std::string handle = fmt::format("{}_r{}_{}", a.send ? "send" : "recv", d.rank, e.record_id);
  if (a.verb == "sendrecv" && a.send) {
    c.async = true;
    c.wait = WaitAt::Handle;
    c.handle = handle;
    sendrecv_handle_[d.rank] = handle;
  } else if (nonblocking) {
    c.async = true;
    if (ended && e.completed_ns) {
      c.wait = WaitAt::Handle;
      c.handle = handle;
      pending_[d.rank].emplace(*e.completed_ns, handle);
    } else {
      c.wait = finished ? WaitAt::Never : WaitAt::End;
    }
  } else if (a.send && ended) {
    c.async = true;
    c.wait = WaitAt::End;
  } else {
    c.async = false;
    c.wait = WaitAt::Call;
  }
  const size_t at = prog.size();
  prog.push_back(std::move(step));
  if (a.verb == "sendrecv" && !a.send) {
    if (const auto it = sendrecv_handle_.find(d.rank); it != sendrecv_handle_.end()) {
      Step w;
      w.kind = Step::Wait;
      w.handle = it->second;
      prog.push_back(std::move(w));
      sendrecv_handle_.erase(it);
    }
  }
  return at;
}

void MpiP2pWriter::end_rank(Program& prog) {
  auto& mine = pending_[current_rank_];
  for (const auto& [t, h] : mine) {
    Step w;
    w.kind = Step::Wait;
    w.handle = h;
    prog.push_back(std::move(w));
  }
  mine.clear();
}

}  // namespace collcheck
