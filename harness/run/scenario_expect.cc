// Judging a replay rather than running it: what production would have
// shown (the symptom), whether the scenario's expect: holds, and the memory a
// replay may take before it starts.
#include <fmt/format.h>

#include <algorithm>

#include "harness/model/size.h"
#include "harness/run/rank_program.h"
#include "harness/run/scenario_runner.h"

namespace collcheck {

// The call that failed first on any rank, and its rank's dump (nulls: none).
std::pair<const RankDump*, const CallRecord*> first_failed_call(const std::vector<RankDump>& dumps) {
  std::pair<const RankDump*, const CallRecord*> f{nullptr, nullptr};
  for (const auto& d : dumps)
    for (const auto& c : d.calls)
      if (c.state == CallState::Failed && (!f.second || c.t_completed < f.second->t_completed)) f = {&d, &c};
  return f;
}

// When the first call failed on any rank (seconds from the start; -1: none).
double first_failure(const std::vector<RankDump>& dumps) {
  const auto [d, c] = first_failed_call(dumps);
  return c ? c->t_completed : -1;
}

// PyTorch's name of a collective in a WorkNCCL (its OpType).
std::string_view op_type(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "ALLREDUCE";
    case Collective::Broadcast: return "BROADCAST";
    case Collective::AllGather: return "ALLGATHER";
    case Collective::ReduceScatter: return "_REDUCE_SCATTER_BASE";
    case Collective::AllToAll: return "ALLTOALL_BASE";
    case Collective::Barrier: return "BARRIER";
    case Collective::Send: return "SEND";
    case Collective::Recv: return "RECV";
  }
  return "UNKNOWN";
}

// What an unguarded run showed from outside, the first thing a user would
// have seen: a rank's call timing out (the watchdog's message, as PyTorch's
// ProcessGroupNCCL prints it), another error, or results the oracle rejects
// while every call returned.
std::string symptom_of(const std::vector<RankDump>& dumps, const std::vector<nlohmann::json>& checked,
                       const std::vector<int>& checked_rank, bool hung, double deadline_s) {
  const auto [fd, first] = first_failed_call(dumps);
  if (first && first->error.find("did not complete by its deadline") != std::string::npos) {
    const int p = fd->members.empty() ? fd->size : static_cast<int>(fd->members.size());
    const size_t in = is_p2p(first->coll) ? first->count : send_elements(first->coll, first->count, p);
    const size_t out = is_p2p(first->coll) ? first->count : recv_elements(first->coll, first->count, p);
    return fmt::format("a hang until the deadline: [Rank {}] Watchdog caught collective operation timeout: "
                       "WorkNCCL(SeqNum={}, OpType={}, NumelIn={}, NumelOut={}, Timeout(ms)={}) ran for {} "
                       "milliseconds before timing out.",
                       fd->rank, first->seq, op_type(first->coll), in, out,
                       static_cast<long long>(std::llround(deadline_s * 1000)),
                       static_cast<long long>(std::llround((first->t_completed - first->t_started) * 1000)));
  }
  if (first)
    return fmt::format("an error: rank {}'s call #{} ({}) failed at {:.3f} s: {}", fd->rank, first->seq,
                       collective_name(first->coll), first->t_completed, first->error);
  if (hung) return "a hang: some ranks never returned within the run's limit";
  for (size_t i = 0; i < checked.size(); ++i) {
    const std::string text = checked[i].at("wrong").get<std::string>();
    if (!text.empty())
      return fmt::format("corrupted output, and every call returned: rank {}'s result of call #{} is wrong: {}",
                         checked_rank[i], checked[i].at("wrong_seq").get<uint64_t>(), text);
  }
  return "";
}

bool has_diagnosis(const ReplayResult& r, std::initializer_list<DiagnosisKind> kinds) {
  for (const auto& d : r.diagnoses)
    for (DiagnosisKind k : kinds)
      if (d.kind == k) return true;
  return false;
}

uint64_t replay_memory_needed(const Scenario& s, int ranks, uint64_t kept_output_bytes) {
  const uint64_t saturated = ~uint64_t{0};
  const uint64_t budget = kept_output_bytes ? kept_output_bytes : kept_output_budget(s.ranks);
  uint64_t worst_rank = 0;
  for (int r = 0; r < s.ranks; ++r) {
    // Bytes of every call, of async calls waited only at the end (or never:
    // input and output held to the end), the largest call, the oracle's scratch.
    uint64_t all = 0, held = 0, largest = 0, pending = 0, check = 0;
    for (const auto& st : s.program(r)) {
      if (st.kind != Step::Call) continue;
      if (!s.in_group(st.call.group, r)) continue;  // not its call
      const uint64_t p = static_cast<uint64_t>(s.group_size(st.call.group)), es = dtype_size(st.call.dtype);
      const Collective k = st.call.coll;
      // The larger buffer of the call (a gather's output, a reduce-scatter's input).
      const auto elements = checked_mul(st.call.count, p);  // bounds the gathers' buffers first
      if (!elements) return saturated;
      const int gp = static_cast<int>(p);
      const auto bytes =
          checked_mul(std::max(send_elements(k, st.call.count, gp), recv_elements(k, st.call.count, gp)), es);
      if (!bytes) return saturated;
      // The oracle's inputs: for an all-reduce p whole buffers when small, p
      // shares (about one buffer) when large, as check_out does; a
      // reduce-scatter's p inputs of count (one input's size).
      if (k == Collective::AllReduce)
        check = std::max(check, st.call.count * p <= kWholeCheckElements ? *bytes * p : *bytes + p * es);
      if (k == Collective::ReduceScatter) check = std::max(check, *bytes);
      largest = std::max(largest, *bytes);
      const auto a = checked_add(all, *bytes);
      if (!a) return saturated;
      all = *a;
      if (st.call.async && st.call.wait != WaitAt::Next) held += *bytes;  // held <= all
      if (st.call.async && st.call.wait == WaitAt::Next) pending = std::max(pending, *bytes);
    }
    // Outputs: those held to the end, the rest up to the kept budget and one
    // call; inputs: those held, the current call's and one pending; the
    // messages in flight on the links (a call's bytes, about); the scratch.
    // Each term but `all` is at most 2^50 or so (2^48 bytes a buffer).
    auto rank = checked_add(std::min(all - held, budget + largest), 2 * largest + pending + check);
    if (rank) rank = checked_add(*rank, held);
    if (rank) rank = checked_add(*rank, held);
    if (!rank) return saturated;
    worst_rank = std::max(worst_rank, *rank);
  }
  const auto n = checked_mul(worst_rank, static_cast<uint64_t>(ranks));
  return n ? *n : saturated;
}

bool diagnosis_matches(const ExpectSpec& e, const Diagnosis& d, std::string* why) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (diagnosis_name(d.kind) != e.diagnosis)
    return say(fmt::format("expected {}, got {}", e.diagnosis, diagnosis_name(d.kind)));
  if (!e.ranks.empty()) {
    auto a = e.ranks, b = d.ranks;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) return say(fmt::format("expected ranks [{}], the diagnosis names [{}]", fmt::join(a, ", "), fmt::join(b, ", ")));
  }
  if (e.seq && d.seq != e.seq)
    return say(fmt::format("expected call #{}, the diagnosis names #{}", *e.seq, d.seq ? std::to_string(*d.seq) : "none"));
  if (e.group && d.group != *e.group)
    return say(fmt::format("expected process group {}, the diagnosis names {}", e.group->empty() ? "world" : *e.group,
                           d.group.empty() ? "world" : d.group));
  if (e.edge && d.edge != e.edge)
    return say(fmt::format("expected edge {} -> {}, the diagnosis names {}", e.edge->first, e.edge->second,
                           d.edge ? fmt::format("{} -> {}", d.edge->first, d.edge->second) : "none"));
  for (const auto& f : e.fields)
    if (std::find(d.fields.begin(), d.fields.end(), f) == d.fields.end())
      return say(fmt::format("expected field '{}' among the differing fields [{}]", f, fmt::join(d.fields, ", ")));
  return true;
}

bool expectation_holds(const ExpectSpec& e, const ReplayResult& r, std::string* why) {
  auto say = [&](std::string w) {
    if (why) *why = std::move(w);
    return false;
  };
  if (e.diagnosis == "none") {
    if (r.diagnoses.empty()) return true;
    return say(fmt::format("expected no diagnosis, got {}", diagnosis_name(r.diagnoses.front().kind)));
  }
  if (r.diagnoses.empty()) return say(fmt::format("expected {}, got no diagnosis", e.diagnosis));
  const Diagnosis& d = r.diagnoses.front();
  if (diagnosis_name(d.kind) != e.diagnosis)
    return say(fmt::format("expected {}, got {} first", e.diagnosis, diagnosis_name(d.kind)));
  return diagnosis_matches(e, d, why);
}

bool expectations_hold(const Scenario& s, const ReplayResult& r, std::string* why) {
  const ExpectSpec none{"none", {}, {}, {}, {}, {}};
  if (!expectation_holds(s.expect ? *s.expect : none, r, why)) return false;
  for (size_t i = 0; i < s.also_expect.size(); ++i) {
    const ExpectSpec& e = s.also_expect[i];
    std::string closest;
    const bool found = std::any_of(r.diagnoses.begin(), r.diagnoses.end(), [&](const Diagnosis& d) {
      std::string w;
      if (diagnosis_matches(e, d, &w)) return true;
      if (closest.empty() || diagnosis_name(d.kind) == e.diagnosis) closest = w;
      return false;
    });
    if (!found) {
      if (why)
        *why = fmt::format("expectation {} ({}) matches none of the {} findings{}", i + 2, e.diagnosis,
                           r.diagnoses.size(), closest.empty() ? "" : ": closest: " + closest);
      return false;
    }
  }
  return true;
}

}  // namespace collcheck
