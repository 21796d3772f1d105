#include "harness/run/analyze_job.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "harness/check/torch_analysis.h"
#include "harness/history/torch_scenario.h"
#include "harness/model/atomic_file.h"
#include "harness/model/size.h"
#include "harness/model/usage_error.h"
#include "harness/report/diagnosis_text.h"
#include "harness/report/timeline.h"

namespace collcheck {

namespace {

// Whether `dir` holds collcheck's own dumps (rank-<r>.json).
bool has_collcheck_dumps(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.starts_with("rank-") && n.ends_with(".json")) return true;
  }
  return false;
}

std::string fixed(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s;
}

// The scenario that reproduces the dumps, expecting what the analysis said.
void emit_torch_scenario(const AnalyzeJob& f, Events& ev, const std::vector<TorchDump>& dumps,
                         const TorchAnalysis& a) {
  TorchScenario t;
  TorchScenarioOptions o;
  o.max_count = f.emit_max_count;
  o.world_size = f.world_size ? std::optional<int>(f.world_size) : std::nullopt;
  o.extra_members = a.inferred_members;
  for (const auto& d : a.diagnoses)
    if (d.kind == DiagnosisKind::MissingRank && d.seq)
      for (const int r : d.ranks) {
        o.stopped_before[{r, d.group}] = static_cast<int64_t>(*d.seq);
        o.extra_members[d.group].push_back(r);  // a member, whether or not the dumps list it
      }
  // The collectives the ranks' k-th calls of group `g` are in the scenario.
  auto colls_at = [](const Scenario& sc, const std::string& g, uint64_t k) {
    std::set<Collective> out;
    for (const auto& [r, prog] : sc.overrides) {
      uint64_t n = 0;
      for (const auto& st : prog)
        if (st.kind == Step::Call && st.call.group == g && !is_p2p(st.call.coll) && ++n == k) {
          out.insert(st.call.coll);
          break;
        }
    }
    return out;
  };
  try {
    t = torch_scenario(dumps, f.dir, o);
  } catch (const TorchTraceError& e) {
    throw UsageError(fmt::format("--emit-scenario: {}", e.what()));
  }
  Scenario& s = t.scenario;
  std::string header = fmt::format("# collcheck analyze {} --emit-scenario {}\n", f.dir, f.emit_scenario);
  if (a.outcome == TorchOutcome::Clean) {
    s.expect = ExpectSpec{"none", {}, {}, {}, {}, {}};
  } else if (a.outcome == TorchOutcome::Undecided) {
    header += "# analyze could not decide from the dumps, so this scenario expects nothing: it is the run the dumps "
              "allow, with what they lack filled in as the notes say\n";
  } else {
    const auto& d = a.diagnoses.front();
    ExpectSpec e;
    e.diagnosis = std::string(diagnosis_name(d.kind));
    e.ranks = d.ranks;
    // An order mismatch is a different collective; what else differs (a
    // barrier has no dtype) is the replay's to list.
    e.fields = d.kind == DiagnosisKind::OrderMismatch ? std::vector<std::string>{"collective"} : d.fields;
    if (const auto g = t.group_of_pg.find(d.group); g != t.group_of_pg.end()) {
      e.group = g->second;
      if (d.seq && d.kind != DiagnosisKind::Deadlock)
        e.seq = scenario_seq(t, d.group, static_cast<int64_t>(*d.seq));
    }
    if (d.kind == DiagnosisKind::Deadlock) e.group.reset();
    // Two collectives written as one (an all_reduce of the same size: MPI's
    // reduce, gather, neighbourhood calls) differ in their tags only.
    if (d.kind == DiagnosisKind::OrderMismatch && e.group && e.seq && colls_at(s, *e.group, *e.seq).size() == 1)
      e.fields = {"tag"};
    s.expect = e;
  }
  std::string text = scenario_to_yaml(s);
  for (const auto& n : t.notes) header += "# note: " + n + "\n";
  try {
    write_file_atomically(f.emit_scenario, header + text);
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format("--emit-scenario: {}", e.what()));
  }
  size_t calls = 0;
  for (const auto& [r, p] : s.overrides) calls += p.size();
  ev.print("scenario written: {} ({} ranks, {} process groups, {} calls; expects {}); run it: collcheck replay {}\n",
             f.emit_scenario, s.ranks, s.groups.size(), calls, s.expect ? s.expect->diagnosis : "nothing",
             f.emit_scenario);
  for (const auto& n : t.notes) ev.print("  note: {}\n", n);
}

// PyTorch Flight Recorder dumps: per process group, who is missing where.
// The process groups whose ranks stopped at different collectives.
void print_lags(Events& ev, const TorchAnalysis& a) {
  ev.print("process groups whose ranks stopped at different collectives, the first entered first:\n");
  ev.print("  {:<9} {:<36} {:<18} {:<16} {:<10} {:<16} {}\n", "PGID", "description", "collective", "size", "dtype",
             "missing ranks", "entered");
  for (const auto& l : a.lags) {
    std::string op = "?", size = "?", dtype = "?";
    if (l.stuck) {
      op = torch_collective(l.stuck->op).empty() ? l.stuck->op : torch_collective(l.stuck->op);
      size = l.stuck->input_sizes.empty() ? "-" : fmt::format("{}", fmt::join(l.stuck->input_sizes.front(), "x"));
      dtype = l.stuck->input_dtypes.empty() ? "-" : l.stuck->input_dtypes.front();
    }
    std::string missing = rank_ranges_text(l.missing);
    missing = missing.substr(missing.find(' ') + 1);
    ev.print("  {:<9} {:<36} {:<18} {:<16} {:<10} {:<16} {}\n", fixed(l.name, 9), fixed(l.desc, 36),
               fixed(op, 18), fixed(size, 16), fixed(dtype, 10), missing,
               l.stuck ? fmt::format("+{:.3f} s", static_cast<double>(l.entered_ns - a.lags.front().entered_ns) / 1e9)
                       : "?");
  }
}

Report analyze_report(const AnalyzeJob& f, const std::vector<TorchDump>& dumps,
                      const TorchAnalysis& a) {
  Report rep;
  rep.command = "analyze";
  rep.suite = fmt::format("collcheck analyze {}", f.dir);
  rep.properties = {{"ranks", std::to_string(dumps.size())},
                    {"format", "PyTorch Flight Recorder " + dumps.front().version},
                    {"outcome", std::string(torch_outcome_name(a.outcome))}};
  using Status = ReportCase::Status;
  const Status st = a.outcome == TorchOutcome::Clean       ? Status::Passed
                    : a.outcome == TorchOutcome::Diagnosis ? Status::Failed
                                                                      : Status::Error;
  std::string message;
  if (!a.diagnoses.empty()) message = std::string(diagnosis_name(a.diagnoses.front().kind));
  else if (!a.undecided.empty()) message = "cannot decide: " + a.undecided.front();
  ReportCase c{"no diagnosis", st, message, "", 0};
  for (const auto& d : a.diagnoses) c.detail += format_diagnosis(d) + "\n";
  for (const auto& u : a.undecided) c.detail += "cannot decide: " + u + "\n";
  if (!a.diagnoses.empty())
    for (const auto& u : a.in_flight) c.detail += "in flight: " + u + "\n";
  rep.cases.push_back(std::move(c));
  return rep;
}

int analyze_torch_dumps(const AnalyzeJob& f, Events& ev, Report& rep) {
  std::vector<TorchDump> dumps;
  TorchAnalysis a;
  try {
    dumps = load_torch_traces(f.dir);
    a = analyze_torch(dumps, f.world_size ? std::optional<int>(f.world_size) : std::nullopt);
  } catch (const TorchTraceError& e) {
    throw UsageError(e.what());
  }
  std::vector<int> ranks;
  for (const auto& d : dumps) ranks.push_back(d.rank);
  const bool gloo = std::any_of(dumps.begin(), dumps.end(), [](const TorchDump& d) {
    return std::any_of(d.entries.begin(), d.entries.end(), [](const auto& e) { return e.op.starts_with("gloo:"); });
  });
  const bool mpi = std::any_of(dumps.begin(), dumps.end(), [](const TorchDump& d) {
    return std::any_of(d.entries.begin(), d.entries.end(), [](const auto& e) { return e.op.starts_with("mpi:"); });
  });
  ev.print("collcheck analyze: {} of {} from {} (format {}{}); world: {} ranks{}\n",
             mpi ? "collcheck's MPI interposer dumps" : "PyTorch Flight Recorder dumps", rank_ranges_text(ranks),
             f.dir, dumps.front().version,
             mpi ? ", " + dumps.front().nccl_version
                 : dumps.front().nccl_version.empty() ? (gloo ? ", Gloo" : "") : ", NCCL " + dumps.front().nccl_version,
             a.world, a.world_known ? "" : " at least");
  ev.print("outcome: {}\n", torch_outcome_name(a.outcome));
  if (a.outcome == TorchOutcome::Clean)
    ev.print("  every rank of the world left a dump, and every process group's last call ended on all of its "
               "members\n");
  for (const auto& d : a.diagnoses) {
    ev.print("  {}\n", format_diagnosis(d));
    ev.emit(FindingEvent{std::string(diagnosis_name(d.kind)), format_diagnosis(d), ""});
  }
  if (!a.lags.empty()) print_lags(ev, a);
  if (!a.undecided.empty())
    ev.print("{}:\n", a.outcome == TorchOutcome::Undecided ? "cannot decide, because"
                                                                          : "what the dumps cannot tell");
  for (const auto& u : a.undecided) ev.print("  {}\n", u);
  if (!a.diagnoses.empty() && !a.in_flight.empty()) {
    ev.print("{} process groups had a last call that every rank known to be in it had issued and that had not ended "
               "when they were dumped (behind the findings above, or in flight):\n",
               a.in_flight.size());
    for (size_t k = 0; k < a.in_flight.size() && k < 3; ++k) ev.print("  {}\n", a.in_flight[k]);
    if (a.in_flight.size() > 3) ev.print("  ... and {} more (--report text=PATH lists them all)\n", a.in_flight.size() - 3);
  }
  for (const auto& n : a.notes) ev.print("note: {}\n", n);
  if (!f.emit_scenario.empty()) emit_torch_scenario(f, ev, dumps, a);
  rep = analyze_report(f, dumps, a);
  return a.outcome == TorchOutcome::Clean ? 0 : a.outcome == TorchOutcome::Diagnosis ? 1 : kExitUndecided;
}

}  // namespace

int run_analyze_job(const AnalyzeJob& f, Events& ev, Report& rep) {
  const std::string& dir = f.dir;
  if (!has_collcheck_dumps(dir)) return analyze_torch_dumps(f, ev, rep);
  if (!f.emit_scenario.empty())
    throw UsageError(fmt::format(
        "--emit-scenario: {} holds collcheck's own dumps, whose run is already a scenario (replay that file); "
        "--emit-scenario reads PyTorch Flight Recorder dumps",
        dir));
  std::vector<RankDump> dumps;
  try {
    dumps = load_dumps(dir);
  } catch (const std::runtime_error& e) {
    throw UsageError(e.what());
  }
  AnalysisOptions ao;
  ao.run_finished = true;
  for (const auto& d : dumps) ao.run_finished = ao.run_finished && d.reason == "end of run";
  const auto found = analyze(dumps, ao);
  ev.print("collcheck analyze: {} ranks from {} (dumped on: {})\n", dumps.size(), dir, dumps.front().reason);
  if (found.empty()) ev.print("diagnosis: none\n");
  for (const auto& d : found) {
    ev.print("  {}\n", format_diagnosis(d));
    ev.emit(FindingEvent{std::string(diagnosis_name(d.kind)), format_diagnosis(d), ""});
  }
  ev.print("{}", format_timeline(dumps));
  rep.command = "analyze";
  rep.suite = fmt::format("collcheck analyze {}", dir);
  rep.properties = {{"ranks", std::to_string(dumps.size())}, {"dumped on", dumps.front().reason}};
  ReportCase c{"no diagnosis", found.empty() ? ReportCase::Status::Passed : ReportCase::Status::Failed,
               found.empty() ? "" : std::string(diagnosis_name(found.front().kind)), "", 0};
  for (const auto& d : found) c.detail += format_diagnosis(d) + "\n";
  rep.cases.push_back(std::move(c));
  rep.runs.push_back(timeline_of(fmt::format("analyze {}", dir), dumps, found, -1));
  return found.empty() ? 0 : 1;
}

}  // namespace collcheck
