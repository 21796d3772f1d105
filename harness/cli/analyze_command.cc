// collcheck analyze: the diagnosis of flight-recorder dumps alone, collcheck's
// own (rank-<r>.json) or PyTorch's Flight Recorder, and for the latter a
// scenario that reproduces them (--emit-scenario).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "harness/check/torch_analysis.h"
#include "harness/cli/commands.h"
#include "harness/history/torch_scenario.h"
#include "harness/model/atomic_file.h"
#include "harness/model/size.h"
#include "harness/report/diagnosis_text.h"
#include "harness/report/timeline.h"

namespace collcheck::cli {

void add_analyze(CLI::App& app, AnalyzeFlags& f) {
  auto* an = app.add_subcommand(
      "analyze", "Diagnose from the per-rank flight-recorder dumps alone: collcheck's (rank-*.json in a directory) or "
                 "PyTorch's Flight Recorder (one file per rank, pickle or JSON, its name ending in the rank). Exit 0: "
                 "clean, 1: a diagnosis, 4: the dumps cannot decide (what is missing is printed), 2: bad input");
  an->add_option("dir", f.dir, "directory with rank-<r>.json files, or PyTorch Flight Recorder dumps")->required();
  an->add_option("--world-size", f.world_size,
                 "PyTorch dumps: how many ranks the job had, when the dumps do not say (torch 2.14's Gloo dumps "
                 "do not): a rank of the world without a dump is then named")
      ->check(CLI::Range(1, 1'000'000));
  an->add_option("--emit-scenario", f.emit_scenario,
                 "PyTorch Flight Recorder dumps: also write a scenario that reproduces the hang to this file (the "
                 "process groups, each rank's recorded collectives, the divergence, and the diagnosis to expect); "
                 "collcheck replay runs it");
  an->add_option("--emit-max-count", f.emit_max_count,
                 "the emitted scenario's largest call, in elements: larger dumps' sizes are scaled down by one factor "
                 "for every call, distinct sizes kept distinct (0: the dumps' sizes)")
      ->capture_default_str();
  add_report_flag(an, f.report);
}

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
void emit_torch_scenario(const AnalyzeFlags& f, const std::vector<collcheck::TorchDump>& dumps,
                         const collcheck::TorchAnalysis& a) {
  collcheck::TorchScenario t;
  collcheck::TorchScenarioOptions o;
  o.max_count = collcheck::parse_count(f.emit_max_count, "--emit-max-count");
  o.world_size = f.world_size ? std::optional<int>(f.world_size) : std::nullopt;
  o.extra_members = a.inferred_members;
  for (const auto& d : a.diagnoses)
    if (d.kind == collcheck::DiagnosisKind::MissingRank && d.seq)
      for (const int r : d.ranks) {
        o.stopped_before[{r, d.group}] = static_cast<int64_t>(*d.seq);
        o.extra_members[d.group].push_back(r);  // a member, whether or not the dumps list it
      }
  try {
    t = collcheck::torch_scenario(dumps, f.dir, o);
  } catch (const collcheck::TorchTraceError& e) {
    throw collcheck::UsageError(fmt::format("--emit-scenario: {}", e.what()));
  }
  collcheck::Scenario& s = t.scenario;
  std::string header = fmt::format("# collcheck analyze {} --emit-scenario {}\n", f.dir, f.emit_scenario);
  if (a.outcome == collcheck::TorchOutcome::Clean) {
    s.expect = collcheck::ExpectSpec{"none", {}, {}, {}, {}, {}};
  } else if (a.outcome == collcheck::TorchOutcome::Undecided) {
    header += "# analyze could not decide from the dumps, so this scenario expects nothing: it is the run the dumps "
              "allow, with what they lack filled in as the notes say\n";
  } else {
    const auto& d = a.diagnoses.front();
    collcheck::ExpectSpec e;
    e.diagnosis = std::string(collcheck::diagnosis_name(d.kind));
    e.ranks = d.ranks;
    // An order mismatch is a different collective; what else differs (a
    // barrier has no dtype) is the replay's to list.
    e.fields = d.kind == collcheck::DiagnosisKind::OrderMismatch ? std::vector<std::string>{"collective"} : d.fields;
    if (const auto g = t.group_of_pg.find(d.group); g != t.group_of_pg.end()) {
      e.group = g->second;
      if (d.seq && d.kind != collcheck::DiagnosisKind::Deadlock)
        e.seq = collcheck::scenario_seq(t, d.group, static_cast<int64_t>(*d.seq));
    }
    if (d.kind == collcheck::DiagnosisKind::Deadlock) e.group.reset();
    s.expect = e;
  }
  std::string text = collcheck::scenario_to_yaml(s);
  for (const auto& n : t.notes) header += "# note: " + n + "\n";
  try {
    collcheck::write_file_atomically(f.emit_scenario, header + text);
  } catch (const std::runtime_error& e) {
    throw collcheck::UsageError(fmt::format("--emit-scenario: {}", e.what()));
  }
  size_t calls = 0;
  for (const auto& [r, p] : s.overrides) calls += p.size();
  f.report.events->print("scenario written: {} ({} ranks, {} process groups, {} calls; expects {}); run it: collcheck replay {}\n",
             f.emit_scenario, s.ranks, s.groups.size(), calls, s.expect ? s.expect->diagnosis : "nothing",
             f.emit_scenario);
  for (const auto& n : t.notes) f.report.events->print("  note: {}\n", n);
}

// PyTorch Flight Recorder dumps: per process group, who is missing where.
// The process groups whose ranks stopped at different collectives.
void print_lags(collcheck::Events& ev, const collcheck::TorchAnalysis& a) {
  ev.print("process groups whose ranks stopped at different collectives, the first entered first:\n");
  ev.print("  {:<9} {:<36} {:<18} {:<16} {:<10} {:<16} {}\n", "PGID", "description", "collective", "size", "dtype",
             "missing ranks", "entered");
  for (const auto& l : a.lags) {
    std::string op = "?", size = "?", dtype = "?";
    if (l.stuck) {
      op = collcheck::torch_collective(l.stuck->op).empty() ? l.stuck->op : collcheck::torch_collective(l.stuck->op);
      size = l.stuck->input_sizes.empty() ? "-" : fmt::format("{}", fmt::join(l.stuck->input_sizes.front(), "x"));
      dtype = l.stuck->input_dtypes.empty() ? "-" : l.stuck->input_dtypes.front();
    }
    std::string missing = collcheck::rank_ranges_text(l.missing);
    missing = missing.substr(missing.find(' ') + 1);
    ev.print("  {:<9} {:<36} {:<18} {:<16} {:<10} {:<16} {}\n", fixed(l.name, 9), fixed(l.desc, 36),
               fixed(op, 18), fixed(size, 16), fixed(dtype, 10), missing,
               l.stuck ? fmt::format("+{:.3f} s", static_cast<double>(l.entered_ns - a.lags.front().entered_ns) / 1e9)
                       : "?");
  }
}

Report analyze_report(const AnalyzeFlags& f, const std::vector<collcheck::TorchDump>& dumps,
                      const collcheck::TorchAnalysis& a) {
  Report rep;
  rep.command = "analyze";
  rep.suite = fmt::format("collcheck analyze {}", f.dir);
  rep.properties = {{"ranks", std::to_string(dumps.size())},
                    {"format", "PyTorch Flight Recorder " + dumps.front().version},
                    {"outcome", std::string(collcheck::torch_outcome_name(a.outcome))}};
  using Status = ReportCase::Status;
  const Status st = a.outcome == collcheck::TorchOutcome::Clean       ? Status::Passed
                    : a.outcome == collcheck::TorchOutcome::Diagnosis ? Status::Failed
                                                                      : Status::Error;
  std::string message;
  if (!a.diagnoses.empty()) message = std::string(collcheck::diagnosis_name(a.diagnoses.front().kind));
  else if (!a.undecided.empty()) message = "cannot decide: " + a.undecided.front();
  ReportCase c{"no diagnosis", st, message, "", 0};
  for (const auto& d : a.diagnoses) c.detail += collcheck::format_diagnosis(d) + "\n";
  for (const auto& u : a.undecided) c.detail += "cannot decide: " + u + "\n";
  if (!a.diagnoses.empty())
    for (const auto& u : a.in_flight) c.detail += "in flight: " + u + "\n";
  rep.cases.push_back(std::move(c));
  return rep;
}

int analyze_torch_dumps(AnalyzeFlags& f) {
  std::vector<collcheck::TorchDump> dumps;
  collcheck::TorchAnalysis a;
  try {
    dumps = collcheck::load_torch_traces(f.dir);
    a = collcheck::analyze_torch(dumps, f.world_size ? std::optional<int>(f.world_size) : std::nullopt);
  } catch (const collcheck::TorchTraceError& e) {
    throw collcheck::UsageError(e.what());
  }
  std::vector<int> ranks;
  for (const auto& d : dumps) ranks.push_back(d.rank);
  const bool gloo = std::any_of(dumps.begin(), dumps.end(), [](const collcheck::TorchDump& d) {
    return std::any_of(d.entries.begin(), d.entries.end(), [](const auto& e) { return e.op.starts_with("gloo:"); });
  });
  f.report.events->print("collcheck analyze: PyTorch Flight Recorder dumps of {} from {} (format {}{}); world: {} ranks{}\n",
             collcheck::rank_ranges_text(ranks), f.dir, dumps.front().version,
             dumps.front().nccl_version.empty() ? (gloo ? ", Gloo" : "") : ", NCCL " + dumps.front().nccl_version,
             a.world, a.world_known ? "" : " at least");
  f.report.events->print("outcome: {}\n", collcheck::torch_outcome_name(a.outcome));
  if (a.outcome == collcheck::TorchOutcome::Clean)
    f.report.events->print("  every rank of the world left a dump, and every process group's last call ended on all of its "
               "members\n");
  for (const auto& d : a.diagnoses) {
    f.report.events->print("  {}\n", collcheck::format_diagnosis(d));
    f.report.events->emit(collcheck::FindingEvent{std::string(collcheck::diagnosis_name(d.kind)), collcheck::format_diagnosis(d), ""});
  }
  if (!a.lags.empty()) print_lags(*f.report.events, a);
  if (!a.undecided.empty())
    f.report.events->print("{}:\n", a.outcome == collcheck::TorchOutcome::Undecided ? "cannot decide, because"
                                                                          : "what the dumps cannot tell");
  for (const auto& u : a.undecided) f.report.events->print("  {}\n", u);
  if (!a.diagnoses.empty() && !a.in_flight.empty()) {
    f.report.events->print("{} process groups had a last call that every rank known to be in it had issued and that had not ended "
               "when they were dumped (behind the findings above, or in flight):\n",
               a.in_flight.size());
    for (size_t k = 0; k < a.in_flight.size() && k < 3; ++k) f.report.events->print("  {}\n", a.in_flight[k]);
    if (a.in_flight.size() > 3) f.report.events->print("  ... and {} more (--report text=PATH lists them all)\n", a.in_flight.size() - 3);
  }
  for (const auto& n : a.notes) f.report.events->print("note: {}\n", n);
  if (!f.emit_scenario.empty()) emit_torch_scenario(f, dumps, a);
  const Report rep = analyze_report(f, dumps, a);
  const int code = a.outcome == collcheck::TorchOutcome::Clean       ? 0
                   : a.outcome == collcheck::TorchOutcome::Diagnosis ? 1
                                                                     : kExitUndecided;
  return finish_reports(f.report, rep, code);
}

}  // namespace

int run_analyze_command(AnalyzeFlags& f) {
  const std::string& dir = f.dir;
  collcheck::parse_count(f.emit_max_count, "--emit-max-count");  // bad input before any output
  if (!has_collcheck_dumps(dir)) return analyze_torch_dumps(f);
  if (!f.emit_scenario.empty())
    throw collcheck::UsageError(fmt::format(
        "--emit-scenario: {} holds collcheck's own dumps, whose run is already a scenario (replay that file); "
        "--emit-scenario reads PyTorch Flight Recorder dumps",
        dir));
  std::vector<collcheck::RankDump> dumps;
  try {
    dumps = collcheck::load_dumps(dir);
  } catch (const std::runtime_error& e) {
    throw collcheck::UsageError(e.what());
  }
  collcheck::AnalysisOptions ao;
  ao.run_finished = true;
  for (const auto& d : dumps) ao.run_finished = ao.run_finished && d.reason == "end of run";
  const auto found = collcheck::analyze(dumps, ao);
  f.report.events->print("collcheck analyze: {} ranks from {} (dumped on: {})\n", dumps.size(), dir, dumps.front().reason);
  if (found.empty()) f.report.events->print("diagnosis: none\n");
  for (const auto& d : found) {
    f.report.events->print("  {}\n", collcheck::format_diagnosis(d));
    f.report.events->emit(collcheck::FindingEvent{std::string(collcheck::diagnosis_name(d.kind)), collcheck::format_diagnosis(d), ""});
  }
  f.report.events->print("{}", collcheck::format_timeline(dumps));
  Report rep;
  rep.command = "analyze";
  rep.suite = fmt::format("collcheck analyze {}", dir);
  rep.properties = {{"ranks", std::to_string(dumps.size())}, {"dumped on", dumps.front().reason}};
  ReportCase c{"no diagnosis", found.empty() ? ReportCase::Status::Passed : ReportCase::Status::Failed,
               found.empty() ? "" : std::string(collcheck::diagnosis_name(found.front().kind)), "", 0};
  for (const auto& d : found) c.detail += collcheck::format_diagnosis(d) + "\n";
  rep.cases.push_back(std::move(c));
  rep.runs.push_back(collcheck::timeline_of(fmt::format("analyze {}", dir), dumps, found, -1));
  return finish_reports(f.report, rep, found.empty() ? 0 : 1);
}

}  // namespace collcheck::cli
