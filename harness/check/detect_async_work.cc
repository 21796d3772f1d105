// Async work misused: an output read before its wait(), and (in a finished
// run) an async call never waited for.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "harness/check/detectors.h"

namespace collcheck::detect {

void async_work(const Dumps& dumps, const AnalysisOptions& o, std::vector<Diagnosis>& out) {
  std::map<uint64_t, std::vector<int>> unwaited, early, written;
  std::map<uint64_t, const CallRecord*> written_call;
  for (const auto& d : dumps) {
    for (const auto& c : d.calls) {
      if (c.async && c.t_read >= 0 && (c.t_waited < 0 || c.t_read < c.t_waited)) early[c.seq].push_back(d.rank);
      if (c.async && c.t_written >= 0 && (c.t_waited < 0 || c.t_written < c.t_waited)) {
        written[c.seq].push_back(d.rank);
        written_call.emplace(c.seq, &c);
      }
      if (c.async && o.run_finished && c.state == CallState::Completed) unwaited[c.seq].push_back(d.rank);
    }
  }
  if (!written.empty()) {
    // OpenNMT-py #2295: the gradients divided in place before the wait of
    // their all-reduce. The device may still be reading or writing the buffer.
    Diagnosis dg;
    dg.kind = DiagnosisKind::WriteBeforeWait;
    dg.seq = written.begin()->first;
    dg.ranks = written.begin()->second;
    const CallRecord& c = *written_call.at(*dg.seq);
    dg.text = fmt::format("the buffer of async call #{} ({}) was written on {} before its wait(): the call may still "
                          "be reading it (an in-place call's input) or may yet overwrite it with the result, so what "
                          "the buffer holds after the wait is undefined; wait() first, then write",
                          *dg.seq, fp_text(c), ranks_text(dg.ranks));
    out.push_back(dg);
  }
  if (!early.empty()) {
    Diagnosis dg;
    dg.kind = DiagnosisKind::ReadBeforeWait;
    dg.seq = early.begin()->first;
    dg.ranks = early.begin()->second;
    dg.text = fmt::format("the output of async call #{} was read on {} before its wait(); collcheck poisons "
                          "unwaited outputs, so the read saw poison, not the result",
                          *dg.seq, ranks_text(dg.ranks));
    out.push_back(dg);
  }
  if (!unwaited.empty()) {
    // Every unwaited call, each with the ranks that left it unwaited (calls
    // left unwaited on the same ranks together): a leak is rarely one call.
    Diagnosis dg;
    dg.kind = DiagnosisKind::UnwaitedWork;
    dg.seq = unwaited.begin()->first;
    std::set<int> ranks;
    std::vector<std::pair<std::vector<int>, std::vector<uint64_t>>> by_ranks;  // in call order of their first call
    for (const auto& entry : unwaited) {  // no structured binding: clang 14 cannot capture one in a lambda
      const uint64_t seq = entry.first;
      const std::vector<int>& rs = entry.second;
      ranks.insert(rs.begin(), rs.end());
      auto it = std::find_if(by_ranks.begin(), by_ranks.end(), [&](const auto& b) { return b.first == rs; });
      if (it == by_ranks.end()) by_ranks.push_back({rs, {seq}});
      else it->second.push_back(seq);
    }
    dg.ranks.assign(ranks.begin(), ranks.end());
    auto call_text = [&](uint64_t seq, int rank) {
      for (const auto& d : dumps)
        if (d.rank == rank)
          if (const CallRecord* c = call_of(d, seq)) return fmt::format("#{} ({})", seq, fp_text(*c));
      return fmt::format("#{}", seq);
    };
    std::string parts;
    size_t listed = 0;
    constexpr size_t kListed = 24;
    for (const auto& [rs, seqs] : by_ranks) {
      std::string calls;
      for (const uint64_t seq : seqs)
        if (listed++ < kListed) calls += (calls.empty() ? "" : ", ") + call_text(seq, rs.front());
      if (!calls.empty()) parts += fmt::format("{}{} on {}", parts.empty() ? "" : "; ", calls, ranks_text(rs));
    }
    if (listed > kListed) parts += fmt::format("; and {} more", listed - kListed);
    dg.text = unwaited.size() == 1
                  ? fmt::format("async call {} completed but its wait() was never made", parts)
                  : fmt::format("{} async calls completed but their wait() was never made: {}", unwaited.size(), parts);
    out.push_back(dg);
  }
}

}  // namespace collcheck::detect
