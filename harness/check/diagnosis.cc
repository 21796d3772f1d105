#include "harness/check/diagnosis.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "harness/check/detectors.h"
#include "harness/model/yaml_input.h"

namespace collcheck {

namespace {
constexpr std::pair<DiagnosisKind, std::string_view> kNames[] = {
    {DiagnosisKind::ShapeMismatch, "shape_mismatch"},       {DiagnosisKind::OrderMismatch, "order_mismatch"},
    {DiagnosisKind::MissingRank, "missing_rank"},           {DiagnosisKind::Deadlock, "deadlock"},
    {DiagnosisKind::UnwaitedWork, "unwaited_work"},         {DiagnosisKind::ReadBeforeWait, "read_before_wait"},
    {DiagnosisKind::SlowLink, "slow_link"},                 {DiagnosisKind::CorruptedPayload, "corrupted_payload"},
    {DiagnosisKind::WrongResult, "wrong_result"},           {DiagnosisKind::CallFailed, "call_failed"},
    {DiagnosisKind::RankCrashed, "rank_crashed"},           {DiagnosisKind::HungCall, "hung_call"},
    {DiagnosisKind::ExtraCall, "extra_call"},               {DiagnosisKind::SkippedCall, "skipped_call"},
    {DiagnosisKind::WriteBeforeWait, "write_before_wait"},     {DiagnosisKind::LateRank, "late_rank"},
};
}  // namespace

std::string group_prefix(const std::string& group) {
  return group.empty() ? "" : fmt::format("process group {}: ", group);
}

std::string ranks_text(const std::vector<int>& r) {
  if (r.size() > 8) return rank_ranges_text(r);  // a large world: 0-36, 38-100, 102-127
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", r[i]);
  return (r.size() == 1 ? "rank " : "ranks ") + s;
}

std::string rank_ranges_text(const std::vector<int>& r) {
  std::string s;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (j >= i + 2)
      s += fmt::format("{}{}-{}", s.empty() ? "" : ", ", r[i], r[j]);
    else
      for (size_t k = i; k <= j; ++k) s += fmt::format("{}{}", s.empty() ? "" : ", ", r[k]);
    i = j + 1;
  }
  return (r.size() == 1 ? "rank " : "ranks ") + s;
}

std::string_view diagnosis_name(DiagnosisKind k) {
  for (const auto& [kind, name] : kNames)
    if (kind == k) return name;
  return "?";
}

std::optional<DiagnosisKind> parse_diagnosis(std::string_view s) {
  for (const auto& [kind, name] : kNames)
    if (name == s) return kind;
  return std::nullopt;
}

std::string diagnosis_choices() {
  std::string s = "none";
  for (const auto& [kind, name] : kNames) s += fmt::format(", {}", name);
  return s;
}

namespace {
// The table of detectors over one communicator's dumps.
std::vector<Diagnosis> run_table(const std::vector<RankDump>& dumps, const AnalysisOptions& o) {
  std::vector<Diagnosis> out;
  for (const auto& row : detect::detectors()) {
    if (row.last_resort && !out.empty()) continue;
    if (std::any_of(out.begin(), out.end(), [&](const Diagnosis& d) {
          return std::find(row.unless.begin(), row.unless.end(), d.kind) != row.unless.end();
        }))
      continue;
    row.detect(dumps, o, out);
  }
  return out;
}

// Findings of several communicators, in this order: what explains the rest first.
int precedence(DiagnosisKind k) {
  using K = DiagnosisKind;
  constexpr K order[] = {K::ShapeMismatch, K::OrderMismatch,  K::ExtraCall, K::SkippedCall, K::RankCrashed, K::Deadlock,
                         K::LateRank,      K::MissingRank,   K::HungCall,       K::CorruptedPayload, K::SlowLink,
                         K::WriteBeforeWait, K::ReadBeforeWait, K::UnwaitedWork,  K::WrongResult,    K::CallFailed};
  for (size_t i = 0; i < std::size(order); ++i)
    if (order[i] == k) return static_cast<int>(i);
  return 99;
}
}  // namespace

std::vector<Diagnosis> analyze(const std::vector<RankDump>& dumps, const AnalysisOptions& o) {
  const bool one_communicator =
      std::all_of(dumps.begin(), dumps.end(), [](const RankDump& d) { return d.group.empty() && !d.p2p; });
  if (one_communicator) return run_table(dumps, o);
  // Process groups or point-to-point calls: each group's collectives through
  // the table on their own, the point-to-point calls paired, and first the
  // cycles of waits that cross them.
  std::map<std::string, std::vector<RankDump>> groups;
  for (const auto& d : dumps)
    if (!d.p2p) groups[d.group].push_back(d);
  std::vector<Diagnosis> out;
  const auto cycle = detect::call_cycle(dumps);
  if (cycle) out.push_back(*cycle);
  // A cycle explains the ranks missing from the calls of its groups and the timeouts that follow.
  auto explained = [&](const Diagnosis& d) {
    using K = DiagnosisKind;
    return cycle && (d.kind == K::MissingRank || d.kind == K::LateRank || d.kind == K::Deadlock || d.kind == K::HungCall ||
                     d.kind == K::CallFailed);
  };
  std::set<std::vector<int>> crashes;
  AnalysisOptions per_group = o;
  per_group.every_dump = &dumps;
  for (const auto& [name, ds] : groups) {
    if (std::all_of(ds.begin(), ds.end(), [](const RankDump& d) { return d.calls.empty(); }) &&
        std::none_of(ds.begin(), ds.end(), [](const RankDump& d) { return d.crash.has_value(); }))
      continue;  // a communicator nobody used
    for (auto& f : run_table(ds, per_group)) {
      if (explained(f)) continue;
      if (f.kind == DiagnosisKind::RankCrashed && !crashes.insert(f.ranks).second) continue;  // every group's dump says it
      f.group = name;
      if (f.kind != DiagnosisKind::RankCrashed) f.text = group_prefix(name) + f.text;
      out.push_back(std::move(f));
    }
  }
  std::vector<Diagnosis> pairs;
  detect::p2p(dumps, o, pairs);
  for (auto& f : pairs)
    if (!explained(f)) out.push_back(std::move(f));
  // Async sends and receives misused (never waited, read or written before
  // their wait), per group, as the table judges collectives.
  std::map<std::string, std::vector<RankDump>> p2p_groups;
  for (const auto& d : dumps)
    if (d.p2p) p2p_groups[d.group].push_back(d);
  for (const auto& [name, ds] : p2p_groups) {
    std::vector<Diagnosis> misuse;
    detect::async_work(ds, per_group, misuse);
    for (auto& f : misuse) {
      f.group = name;
      f.text = group_prefix(name) + "point-to-point: " + f.text;
      out.push_back(std::move(f));
    }
  }
  // A run that hung is named by its hang: its link timings were taken among
  // ranks whose streams queued behind stuck calls, and a replay of many ranks
  // as threads on few cores shows slow edges that no link had (the emitted
  // Flight Recorder scenarios: 16 ranks, 2 cores). The slow link stays when
  // nothing stopped.
  using K = DiagnosisKind;
  const bool hung = std::any_of(out.begin(), out.end(), [](const Diagnosis& d) {
    return d.kind == K::MissingRank || d.kind == K::LateRank || d.kind == K::Deadlock || d.kind == K::HungCall ||
           d.kind == K::RankCrashed;
  });
  if (hung) std::erase_if(out, [](const Diagnosis& d) { return d.kind == K::SlowLink; });
  // Findings of one kind in several groups: the one whose call some rank
  // entered first comes first. When a rank stops, the others get stuck in
  // every group it shares with them; the first group they got stuck in is
  // where the job stopped (the others queued behind it on their streams).
  auto entered = [&](const Diagnosis& d) {
    double first = std::numeric_limits<double>::infinity();
    if (!d.seq) return first;
    const auto g = groups.find(d.group);
    if (g == groups.end()) return first;
    for (const auto& r : g->second)
      for (const auto& c : r.calls)
        if (c.seq == *d.seq && c.t_started >= 0) first = std::min(first, c.t_started);
    return first;
  };
  // Blame goes upstream first: a rank missing from one group's call while it
  // sits in another group's call that it could not finish waits on someone
  // else, so a finding that names such a rank comes after those that name
  // none (the rank that exited, not the one stuck behind it).
  auto blocked_elsewhere = [&](const Diagnosis& d) {
    if (d.kind != K::MissingRank) return false;
    return std::any_of(d.ranks.begin(), d.ranks.end(), [&](int r) {
      return std::any_of(dumps.begin(), dumps.end(), [&](const RankDump& x) {
        return x.rank == r && x.group != d.group && std::any_of(x.calls.begin(), x.calls.end(), [](const CallRecord& c) {
                 return c.t_started >= 0 && !detect::finished(c);
               });
      });
    });
  };
  struct Keyed {
    bool downstream;
    double entered;
    Diagnosis d;
  };
  std::vector<Keyed> keyed;
  for (auto& d : out) keyed.push_back({blocked_elsewhere(d), entered(d), std::move(d)});
  std::stable_sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    if (precedence(a.d.kind) != precedence(b.d.kind)) return precedence(a.d.kind) < precedence(b.d.kind);
    if (a.downstream != b.downstream) return b.downstream;
    return a.entered < b.entered;
  });
  out.clear();
  for (auto& k : keyed) {
    // Say where a downstream rank was stuck: blame reads upstream.
    if (k.downstream)
      for (int r : k.d.ranks)
        for (const auto& x : dumps)
          if (x.rank == r && x.group != k.d.group && !x.p2p)
            for (const auto& c : x.calls)
              if (c.t_started >= 0 && !detect::finished(c)) {
                k.d.text += fmt::format("; rank {} was itself stuck in {}call #{} ({}), which it could not finish: "
                                        "the cause is upstream, in the finding above",
                                        r, x.group.empty() ? "" : "process group " + x.group + "'s ", c.seq,
                                        detect::fp_text(c));
                break;
              }
    out.push_back(std::move(k.d));
  }
  // A call failed is the last resort: only when nothing else explains the run.
  if (out.size() > 1)
    std::erase_if(out, [](const Diagnosis& d) { return d.kind == DiagnosisKind::CallFailed; });
  return out;
}

// A recorder keeps 4096 calls and 16384 transfers: a real dump is a few MB.
constexpr uintmax_t kMaxDumpBytes = uintmax_t{256} << 20;

std::vector<RankDump> load_dumps(const std::string& dir) {
  std::vector<RankDump> out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw std::runtime_error(fmt::format("{}: not a directory", dir));
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto name = e.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".json") continue;
    // Bounded, and only a regular file (a FIFO named rank-0.json would block).
    const std::string text = read_input_file<std::runtime_error>(e.path().string(), kMaxDumpBytes,
                                                                 "a collcheck flight-recorder dump", "no flag");
    try {
      out.push_back(rank_dump_from_json(nlohmann::json::parse(text)));
    } catch (const std::exception& ex) {
      throw std::runtime_error(fmt::format("{}: not a collcheck flight-recorder dump: {}", e.path().string(), ex.what()));
    }
  }
  if (out.empty()) throw std::runtime_error(fmt::format("{}: no rank-*.json dumps found", dir));
  std::sort(out.begin(), out.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
  // One run's dumps only: a set mixed from two runs gives a confident
  // diagnosis that no run had.
  std::map<std::string, std::vector<int>> runs;  // run id -> ranks
  for (const auto& d : out) runs[d.run_id.empty() ? "(none: an older dump)" : d.run_id].push_back(d.rank);
  if (runs.size() > 1) {
    std::string parts;
    for (const auto& [id, ranks] : runs)
      parts += fmt::format("{}{} of run {}", parts.empty() ? "" : "; ", ranks_text(ranks), id);
    throw std::runtime_error(fmt::format("{}: the dumps come from {} different runs ({}); analyze one run's dumps", dir,
                                         runs.size(), parts));
  }
  const int size = out.front().size;
  std::set<int> have;
  std::set<std::tuple<std::string, bool, int>> communicators;  // a process group's dumps: (group, p2p, rank)
  size_t world_dumps = 0;
  for (const auto& d : out) {
    if (d.size != size)
      throw std::runtime_error(fmt::format("{}: the dumps are of different worlds: rank {} of size {}, rank {} of size {}",
                                           dir, out.front().rank, size, d.rank, d.size));
    if (!d.group.empty() || d.p2p) {
      if (!communicators.insert({d.group, d.p2p, d.rank}).second)
        throw std::runtime_error(fmt::format("{}: rank {} dumped {}'s {} twice", dir, d.rank,
                                             d.group.empty() ? "the world" : "group " + d.group,
                                             d.p2p ? "point-to-point calls" : "collectives"));
      continue;
    }
    ++world_dumps;
    if (d.rank < 0 || d.rank >= size || !have.insert(d.rank).second)
      throw std::runtime_error(fmt::format("{}: rank {} is not one of ranks 0..{}, or appears twice", dir, d.rank,
                                           size - 1));
  }
  if (static_cast<int>(world_dumps) != size) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (!have.count(r)) missing.push_back(r);
    std::string crash;
    for (const auto& d : out) {
      if (d.crash && d.crash->rank >= 0)
        crash = fmt::format(". These are crash dumps: rank {} died of signal {}, and in the MPI world only the "
                            "process that died writes its dump",
                            d.crash->rank, d.crash->signal);
    }
    throw std::runtime_error(fmt::format("{}: dumps of a world of {} ranks, but {} missing; the analysis needs every "
                                         "rank's dump{}",
                                         dir, size, ranks_text(missing) + (missing.size() == 1 ? " is" : " are"),
                                         crash));
  }
  return out;
}

}  // namespace collcheck
